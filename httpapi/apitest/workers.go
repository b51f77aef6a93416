package apitest

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// testWorkers: a remote worker's poll lists it under GET /v1/workers with
// its handlers, the node that served it and when it polled.
func testWorkers(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	before := time.Now().Add(-time.Second)
	r := a.do("GET", "/v1/workers", "")
	expect(t, r, 200, "workers before any poll")
	var out httpapi.ListWorkersResponse
	r.json(t, &out)
	if out.Workers == nil || slices.ContainsFunc(out.Workers, func(w httpapi.Worker) bool { return w.Worker == "w1" }) {
		t.Fatalf("workers before any poll: %s", r.body)
	}
	if r := a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["b","a"]}`); r.status != 204 {
		t.Fatalf("poll: %d %s", r.status, r.body)
	}
	r = a.do("GET", "/v1/workers", "")
	expect(t, r, 200, "workers")
	var raw struct {
		Workers []map[string]any `json:"workers"`
	}
	r.json(t, &raw)
	var w1 map[string]any
	for _, w := range raw.Workers {
		if w["worker"] == "w1" {
			w1 = w
		}
	}
	if w1 == nil {
		t.Fatalf("w1 is not listed after its poll: %s", r.body)
	}
	if got := fmt.Sprint(w1["handlers"]); got != "[a b]" {
		t.Errorf("w1's handlers = %s, want [a b]: %s", got, r.body)
	}
	if node, _ := w1["node"].(string); node == "" {
		t.Errorf("w1 has no node: %s", r.body)
	}
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(w1["last_poll_at"]))
	if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("w1's last_poll_at = %v (%v), want the time of its poll: %s", w1["last_poll_at"], err, r.body)
	}

	r = a.do("POST", "/v1/tasks/poll", fmt.Sprintf(`{"worker":%q,"handlers":["a"]}`, strings.Repeat("w", 257)))
	expect(t, r, 400, "a worker name too long to list")
	if !bytes.Contains(r.body, []byte("worker name is 257 bytes long, at most 256 are allowed")) {
		t.Errorf("a worker name too long to list: %s", r.body)
	}
}

// testIDPrefix: ?id_prefix= keeps the ids that start with it, literally
// ("_" is no wildcard), combines with the other filters and pages.
func testIDPrefix(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	for _, id := range []string{"ab_1", "abx1", "ab_2", "ab_3", "AB_4", "zab_5", "ab_"} {
		a.create(id, "")
	}
	expect(t, a.do("POST", "/v1/workflows/ab_2/cancel", ""), 200, "cancel ab_2")
	list := func(query string) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("paging does not end")
			}
			r := a.do("GET", "/v1/workflows?limit=1&"+query+"&cursor="+url.QueryEscape(cursor), "")
			expect(t, r, 200, "list "+query)
			var page httpapi.ListWorkflowsResponse
			r.json(t, &page)
			for _, w := range page.Workflows {
				ids = append(ids, w.ID)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		slices.Sort(ids)
		return ids
	}
	for query, want := range map[string][]string{
		"id_prefix=ab_":                  {"ab_", "ab_1", "ab_2", "ab_3"},
		"id_prefix=ab":                   {"ab_", "ab_1", "ab_2", "ab_3", "abx1"},
		"id_prefix=ab_&status=PENDING":   {"ab_", "ab_1", "ab_3"},
		"id_prefix=ab_&status=CANCELLED": {"ab_2"},
		"id_prefix=AB":                   {"AB_4"},
		"id_prefix=nothing":              nil,
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("list %s = %v, want %v", query, got, want)
		}
	}
	for _, q := range []string{"id_prefix=", "id_prefix=a%25", "id_prefix=a%5C", "id_prefix=a+b", "id_prefix=" + strings.Repeat("a", 129)} {
		r := a.do("GET", "/v1/workflows?"+q, "")
		expect(t, r, 400, "list "+q)
		if !bytes.Contains(r.body, []byte("id prefix")) {
			t.Errorf("list %s: %s does not name the id prefix", q, r.body)
		}
	}
}
