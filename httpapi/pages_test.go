package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// pageServer serves the API over a fresh store of backend b with a page
// byte bound of maxBytes (0: the default); wrap, if set, wraps the store.
func pageServer(t *testing.T, open func(*testing.T) store.Backend, maxBytes int, wrap func(store.Backend) store.Backend) (store.Backend, string) {
	t.Helper()
	st := open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	served := st
	if wrap != nil {
		served = wrap(st)
	}
	h, err := httpapi.NewServer(httpapi.Config{Store: served, MaxPageBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return st, srv.URL
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
	return len(b)
}

// bigState is a state of about n bytes.
func bigState(n int) workflow.State {
	s := workflow.State{}
	if err := s.SetVar("blob", strings.Repeat("x", n)); err != nil {
		panic(err)
	}
	return s
}

// TestListPageByteBound: a list page ends once its workflows reach the
// byte bound, with a next_cursor that continues exactly after its last
// workflow; every workflow is listed once, in order.
func TestListPageByteBound(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st, url := pageServer(t, b.open, 3000, nil)
			for i := range 12 {
				if _, err := st.Create(t.Context(), store.CreateParams{ID: fmt.Sprintf("big-%02d", i), State: bigState(1000)}); err != nil {
					t.Fatal(err)
				}
			}
			want, err := st.List(t.Context(), store.ListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			pages := 0
			for cursor := ""; ; {
				var p httpapi.ListWorkflowsResponse
				size := getJSON(t, url+"/v1/workflows?limit=12&cursor="+cursor, &p)
				pages++
				// Three workflows of about 1,050 bytes reach 3,000.
				if len(p.Workflows) > 3 || size > 3000+1200+100 {
					t.Errorf("page %d: %d workflows, %d bytes; the bound is 3000", pages, len(p.Workflows), size)
				}
				for _, w := range p.Workflows {
					got = append(got, w.ID)
				}
				if p.NextCursor == "" {
					break
				}
				if pages > 12 {
					t.Fatal("paging does not end")
				}
				cursor = p.NextCursor
			}
			if pages != 4 {
				t.Errorf("%d pages, want 4 of 3", pages)
			}
			if len(got) != len(want.Instances) {
				t.Fatalf("listed %v, want %d workflows", got, len(want.Instances))
			}
			for i, inst := range want.Instances {
				if got[i] != inst.ID {
					t.Fatalf("listed %v; position %d should be %s", got, i, inst.ID)
				}
			}
			// One workflow larger than the bound still makes a page.
			if _, err := st.Create(t.Context(), store.CreateParams{ID: "huge", State: bigState(5000)}); err != nil {
				t.Fatal(err)
			}
			var p httpapi.ListWorkflowsResponse
			getJSON(t, url+"/v1/workflows?limit=5", &p)
			if len(p.Workflows) != 1 || p.Workflows[0].ID != "huge" || p.NextCursor == "" {
				t.Errorf("a page starting with a workflow over the bound: %d workflows, next_cursor %q", len(p.Workflows), p.NextCursor)
			}
		})
	}
}

// TestHistoryPageByteBound: a history page ends at the byte bound with
// next_since, and the pages together are every version once.
func TestHistoryPageByteBound(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st, url := pageServer(t, b.open, 3000, nil)
			inst, err := st.Create(t.Context(), store.CreateParams{ID: "h", State: bigState(1000)})
			if err != nil {
				t.Fatal(err)
			}
			for range 9 {
				if inst, err = storetest.Replace(t.Context(), st, "h", inst.Version, bigState(1000+int(inst.Version)), "grow"); err != nil {
					t.Fatal(err)
				}
			}
			var versions []int64
			pages := 0
			for since := int64(0); ; {
				var p httpapi.HistoryResponse
				getJSON(t, fmt.Sprintf("%s/v1/workflows/h/history?since=%d", url, since), &p)
				pages++
				if len(p.Versions) > 3 {
					t.Errorf("page %d: %d versions over the bound", pages, len(p.Versions))
				}
				for _, v := range p.Versions {
					versions = append(versions, v.Version)
				}
				if p.NextSince == nil {
					break
				}
				if pages > 10 || *p.NextSince != versions[len(versions)-1]+1 {
					t.Fatalf("next_since %d after versions %v", *p.NextSince, versions)
				}
				since = *p.NextSince
			}
			if len(versions) != 10 || pages != 4 {
				t.Fatalf("versions %v in %d pages, want 0–9 in 4", versions, pages)
			}
			for i, v := range versions {
				if v != int64(i) {
					t.Fatalf("versions %v are not contiguous", versions)
				}
			}
		})
	}
}

// failingReads fails every List and History call after the first.
type failingReads struct {
	store.Backend
	calls atomic.Int32
}

func (f *failingReads) List(ctx context.Context, p store.ListParams) (store.ListPage, error) {
	if f.calls.Add(1) > 1 {
		return store.ListPage{}, fmt.Errorf("list: %w", store.ErrUnavailable)
	}
	return f.Backend.List(ctx, p)
}

func (f *failingReads) History(ctx context.Context, id string, since int64, limit int) ([]store.HistoryEntry, error) {
	if f.calls.Add(1) > 1 {
		return nil, fmt.Errorf("history: %w", store.ErrUnavailable)
	}
	return f.Backend.History(ctx, id, since, limit)
}

// TestPageCutByStoreError: when the store fails after a page has begun,
// the page ends with the workflows written so far and a next_cursor from
// there; when it fails at once, the error is the answer.
func TestPageCutByStoreError(t *testing.T) {
	var f *failingReads
	st, url := pageServer(t, backends[0].open, 0, func(s store.Backend) store.Backend {
		f = &failingReads{Backend: s}
		return f
	})
	for i := range 60 {
		if _, err := st.Create(t.Context(), store.CreateParams{ID: fmt.Sprintf("w-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var p httpapi.ListWorkflowsResponse
	getJSON(t, url+"/v1/workflows?limit=100", &p)
	if len(p.Workflows) != 10 || p.NextCursor == "" || p.Workflows[9].ID != "w-50" {
		t.Fatalf("page cut by an error: %d workflows, next_cursor %q; want the first chunk of 10 (w-59 to w-50) and a cursor", len(p.Workflows), p.NextCursor)
	}
	rest, err := st.List(t.Context(), store.ListParams{Cursor: p.NextCursor, Limit: 100})
	if err != nil || len(rest.Instances) != 50 || rest.Instances[0].ID != "w-49" {
		t.Errorf("the cut page's cursor continues with %d workflows, %v; want w-49 and 49 more", len(rest.Instances), err)
	}
	res, err := http.Get(url + "/v1/workflows")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a list whose first read fails: %d, want 503", res.StatusCode)
	}
}

// TestSlowReaderDisconnected: a client that does not read its page is
// disconnected once the request timeout has passed, so the handler, and
// the rows it holds, do not wait for it for ever.
func TestSlowReaderDisconnected(t *testing.T) {
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 16 MiB of workflows: more than the connection's buffers hold.
	for i := range 64 {
		if _, err := st.Create(t.Context(), store.CreateParams{State: bigState(256 << 10)}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	h, err := httpapi.NewServer(httpapi.Config{Store: st, RequestTimeout: 500 * time.Millisecond, MaxPageBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/workflows?limit=64 HTTP/1.1\r\nHost: %s\r\n\r\n", srv.Listener.Addr()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler still writes to a client that does not read, 30 s on")
	}
}
