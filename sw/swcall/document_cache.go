package swcall

import (
	"net/http"
	"sync"
	"time"
)

// documentTTL is how long a fetched OpenAPI document is reused: a workflow
// that calls an API in a loop fetches its description once, and a changed
// description is seen within this time.
const documentTTL = time.Minute

// maxCachedDocuments bounds the cache; past it, expired entries go first,
// then the oldest.
const maxCachedDocuments = 64

// documents caches parsed OpenAPI documents per (client, URL): two clients
// may reach different servers under the same URL (a test stub, a proxy).
var documents = newDocumentCache(time.Now)

type documentKey struct {
	client *http.Client
	url    string
}

type cachedDocument struct {
	doc     *apiDocument
	fetched time.Time
}

type documentCache struct {
	now     func() time.Time
	mu      sync.Mutex
	entries map[documentKey]cachedDocument
}

func newDocumentCache(now func() time.Time) *documentCache {
	return &documentCache{now: now, entries: map[documentKey]cachedDocument{}}
}

// get returns the document cached for key if it is fresh.
func (c *documentCache) get(key documentKey) (*apiDocument, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.now().Sub(e.fetched) >= documentTTL {
		return nil, false
	}
	return e.doc, true
}

// put caches doc for key, making room if the cache is full.
func (c *documentCache) put(key documentKey, doc *apiDocument) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxCachedDocuments {
		var oldest documentKey
		first := true
		for k, e := range c.entries {
			if now.Sub(e.fetched) >= documentTTL {
				delete(c.entries, k)
				continue
			}
			if first || e.fetched.Before(c.entries[oldest].fetched) {
				oldest, first = k, false
			}
		}
		if len(c.entries) >= maxCachedDocuments {
			delete(c.entries, oldest)
		}
	}
	c.entries[key] = cachedDocument{doc: doc, fetched: now}
}
