package swcall

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestDocumentCacheReusesAFreshDocument(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		_, _ = io.WriteString(w, `{"swagger": "2.0", "paths": {}}`)
	}))
	t.Cleanup(srv.Close)
	docURL, _ := url.Parse(srv.URL + "/doc.json")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cache := newDocumentCache(func() time.Time { return now })
	fetch := func() {
		t.Helper()
		if _, err := cache.fetch(t.Context(), srv.Client(), docURL); err != nil {
			t.Fatal(err)
		}
	}

	fetch()
	now = now.Add(documentTTL - time.Second)
	fetch()
	if n := fetches.Load(); n != 1 {
		t.Errorf("fetched %d times within the TTL; want 1", n)
	}
	now = now.Add(time.Second)
	fetch()
	if n := fetches.Load(); n != 2 {
		t.Errorf("fetched %d times after the TTL; want 2", n)
	}
	// Another client is another cache entry.
	if _, err := cache.fetch(t.Context(), &http.Client{}, docURL); err != nil {
		t.Fatal(err)
	}
	if n := fetches.Load(); n != 3 {
		t.Errorf("fetched %d times with a second client; want 3", n)
	}
}

func TestDocumentCacheIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cache := newDocumentCache(func() time.Time { return now })
	key := func(i int) documentKey { return documentKey{url: "http://h/" + strconv.Itoa(i)} }
	for i := range maxCachedDocuments + 1 {
		cache.put(key(i), &apiDocument{})
		now = now.Add(time.Millisecond)
	}
	if len(cache.entries) != maxCachedDocuments {
		t.Errorf("cache holds %d documents; want %d", len(cache.entries), maxCachedDocuments)
	}
	if _, ok := cache.get(key(0)); ok {
		t.Error("the oldest document should have been evicted")
	}
	if _, ok := cache.get(key(maxCachedDocuments)); !ok {
		t.Error("the newest document should be cached")
	}
}
