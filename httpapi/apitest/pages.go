package apitest

import (
	"fmt"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// testHistoryPages: ?since=V&limit=N pages the history; next_since is
// present exactly when more versions follow.
func testHistoryPages(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	a.create("pages", "")
	for v := range 6 {
		expect(t, a.do("PATCH", "/v1/workflows/pages", fmt.Sprintf(`{"variables":{"v":%d}}`, v+1), "If-Match", fmt.Sprintf(`"%d"`, v)), 200, "patch")
	}
	page := func(query string) httpapi.HistoryResponse {
		t.Helper()
		r := a.do("GET", "/v1/workflows/pages/history"+query, "")
		expect(t, r, 200, "history"+query)
		var h httpapi.HistoryResponse
		r.json(t, &h)
		if h.Versions == nil {
			t.Fatalf("history%s: no versions array in %s", query, r.body)
		}
		return h
	}
	check := func(query string, first, n int, next int64) {
		t.Helper()
		h := page(query)
		if len(h.Versions) != n {
			t.Fatalf("history%s: %d versions, want %d", query, len(h.Versions), n)
		}
		for i, v := range h.Versions {
			if v.Version != int64(first+i) {
				t.Errorf("history%s: versions[%d] is version %d, want %d", query, i, v.Version, first+i)
			}
		}
		switch {
		case next < 0 && h.NextSince != nil:
			t.Errorf("history%s: next_since %d on the last page", query, *h.NextSince)
		case next >= 0 && (h.NextSince == nil || *h.NextSince != next):
			t.Errorf("history%s: next_since %v, want %d", query, h.NextSince, next)
		}
	}
	check("", 0, 7, -1)
	check("?limit=3", 0, 3, 3)
	check("?since=3&limit=3", 3, 3, 6)
	check("?since=6&limit=3", 6, 1, -1)
	check("?since=4&limit=3", 4, 3, -1) // exactly the rest: no next page
	check("?since=2", 2, 5, -1)
	check("?since=7", 0, 0, -1)
	check("?since=1000&limit=1000", 0, 0, -1)
	for _, q := range []string{"since=-1", "since=x", "since=", "since=1.5", "limit=0", "limit=1001", "limit=x", "limit=", "since=99999999999999999999"} {
		expect(t, a.do("GET", "/v1/workflows/pages/history?"+q, ""), 400, "history?"+q)
	}
	expect(t, a.do("GET", "/v1/workflows/nope/history?since=3", ""), 404, "unknown id with since")
}

// testListChunks: a page longer than the store chunk the server reads at
// a time is whole, in order, and continues exactly where it stopped.
func testListChunks(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	const n = 130
	for i := range n {
		a.create(fmt.Sprintf("chunk-%03d", i), "")
	}
	var all []string
	for cursor, pages := "", 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		r := a.do("GET", "/v1/workflows?limit=120&cursor="+cursor, "")
		expect(t, r, 200, "list")
		var p httpapi.ListWorkflowsResponse
		r.json(t, &p)
		for _, w := range p.Workflows {
			all = append(all, w.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(all) != n {
		t.Fatalf("%d workflows listed, want %d", len(all), n)
	}
	r := a.do("GET", "/v1/workflows?limit=1000", "")
	var whole httpapi.ListWorkflowsResponse
	r.json(t, &whole)
	if whole.NextCursor != "" || len(whole.Workflows) != n {
		t.Fatalf("one page of 1000: %d workflows, next_cursor %q", len(whole.Workflows), whole.NextCursor)
	}
	for i, w := range whole.Workflows {
		if all[i] != w.ID {
			t.Fatalf("paged list differs from one page at %d: %s, want %s", i, all[i], w.ID)
		}
	}
	r = a.do("GET", "/v1/workflows?limit=130", "")
	var exact httpapi.ListWorkflowsResponse
	r.json(t, &exact)
	if len(exact.Workflows) != n || exact.NextCursor != "" {
		t.Errorf("a limit of exactly all: %d workflows, next_cursor %q; want %d and none", len(exact.Workflows), exact.NextCursor, n)
	}
}
