package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	wire "github.com/flowd/flowd/api"
)

// testBulk: the bulk routes, their status codes and every client mistake
// they answer. Whether the operation is worked off is the engine's
// (engine/bulk_test.go) and the server's (cmd/flowd): here a new one is
// RUNNING until it is cancelled.
func testBulk(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/bulk-job", `{"name": "bulk-job", "steps": [{"id": "a", "type": "wait"}]}`), 201, "definition")
	for i := range 3 {
		expect(t, a.do("POST", "/v1/workflows", fmt.Sprintf(`{"id": "bulk-%d", "definition": "bulk-job"}`, i)), 201, "start")
	}

	// How many a filter matches, before acting.
	var count wire.BulkCount
	r := a.do("GET", "/v1/bulk/count?definition=bulk-job&status=RUNNING", "")
	expect(t, r, 200, "count")
	r.json(t, &count)
	if count.Count != 3 || !count.Exact {
		t.Errorf("count: %s, want 3, exact", r.body)
	}
	r = a.do("GET", "/v1/bulk/count?id_prefix=bulk-1", "")
	expect(t, r, 200, "count by prefix")
	if r.json(t, &count); count.Count != 1 {
		t.Errorf("count by prefix: %s, want 1", r.body)
	}

	r = a.do("POST", "/v1/bulk", `{"action": "pause", "filter": {"definition": "bulk-job", "status": "RUNNING", "created_after": "2000-01-01t00:00:00z", "search": {"n": 42, "vip": true, "team": "a"}}, "limit": 2}`)
	expect(t, r, 202, "create")
	var op wire.BulkOperation
	r.json(t, &op)
	if op.ID == "" || op.Action != "pause" || op.Status != "RUNNING" || op.Limit != 2 || op.Filter.Definition != "bulk-job" ||
		op.Filter.Status != "RUNNING" || op.Filter.CreatedAfter != "2000-01-01T00:00:00Z" || op.Errors == nil || op.CreatedAt.IsZero() {
		t.Errorf("created: %s", r.body)
	}
	if string(op.Filter.Search["n"]) != `"42"` || string(op.Filter.Search["vip"]) != `"true"` || string(op.Filter.Search["team"]) != `"a"` {
		t.Errorf("search values are compared as text: %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/bulk/"+op.ID {
		t.Errorf("Location = %q", loc)
	}
	for _, field := range []string{`"matched":0`, `"done":0`, `"skipped":0`, `"failed":0`, `"errors":[]`} {
		if !bytes.Contains(r.body, []byte(field)) {
			t.Errorf("created: %s, want %s", r.body, field)
		}
	}
	r = a.do("GET", "/v1/bulk/"+op.ID, "")
	expect(t, r, 200, "get")
	var got wire.BulkOperation
	if r.json(t, &got); got.ID != op.ID || got.Action != "pause" {
		t.Errorf("get: %s", r.body)
	}
	var list wire.ListBulkResponse
	r = a.do("GET", "/v1/bulk", "")
	expect(t, r, 200, "list")
	if r.json(t, &list); len(list.Operations) != 1 || list.Operations[0].ID != op.ID {
		t.Errorf("list: %s", r.body)
	}
	r = a.do("GET", "/v1/bulk?status=CANCELLED&limit=5", "")
	expect(t, r, 200, "list by status")
	if r.json(t, &list); len(list.Operations) != 0 {
		t.Errorf("list of CANCELLED ones: %s", r.body)
	}
	// The filter's search attributes match none of these workflows: an
	// engine that works the operation off changes none of them.

	// Cancelled, and cancelled again: the same answer. A server whose
	// engine works operations off (flowd serve) may have finished it
	// first: a DONE one cannot be cancelled.
	r = a.do("POST", "/v1/bulk/"+op.ID+"/cancel", "")
	if r.status == 409 {
		expect(t, r, 409, "cancel of a DONE one")
		r = a.do("GET", "/v1/bulk/"+op.ID, "")
		if r.json(t, &got); got.Status != "DONE" || got.FinishedAt == nil || !bytes.Contains(r.body, []byte(`"matched":`)) {
			t.Errorf("cancel answered 409 for an operation that is not DONE: %s", r.body)
		}
	} else {
		expect(t, r, 200, "cancel")
		if r.json(t, &got); got.Status != "CANCELLED" || got.FinishedAt == nil {
			t.Errorf("cancel: %s", r.body)
		}
		r = a.do("POST", "/v1/bulk/"+op.ID+"/cancel", "{}")
		expect(t, r, 200, "cancel again")
		var again wire.BulkOperation
		if r.json(t, &again); again.Status != "CANCELLED" || !again.FinishedAt.Equal(*got.FinishedAt) {
			t.Errorf("cancel again: %s", r.body)
		}
	}
	expect(t, a.do("GET", "/v1/bulk/nope", ""), 404, "get unknown")
	expect(t, a.do("POST", "/v1/bulk/nope/cancel", ""), 404, "cancel unknown")

	// Client mistakes: each answered 400 with what is wrong.
	for _, tc := range []struct{ body, want string }{
		{`{"action": "cancel", "filter": {}}`, "the filter is empty"},
		{`{"action": "cancel"}`, "the filter is empty"},
		{`{"action": "explode", "filter": {"definition": "bulk-job"}}`, `unknown action \"explode\"`},
		{`{"filter": {"definition": "bulk-job"}}`, `unknown action \"\"`},
		{`{"action": "cancel", "filter": {"status": "SLEEPING"}}`, `filter.status: unknown status \"SLEEPING\"`},
		{`{"action": "cancel", "filter": {"created_after": "yesterday"}}`, `filter.created_after \"yesterday\" is not an RFC 3339 time`},
		{`{"action": "cancel", "filter": {"created_before": "2026-13-01T00:00:00Z"}}`, "filter.created_before"},
		{`{"action": "cancel", "filter": {"updated_before": "2026-01-01"}}`, "filter.updated_before"},
		{`{"action": "cancel", "filter": {"created_after": "2026-02-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}}`, "created_after must be before"},
		{`{"action": "cancel", "filter": {"definition": "bulk-job"}, "limit": 0}`, "limit must be from 1 to 10000000, not 0"},
		{`{"action": "cancel", "filter": {"definition": "bulk-job"}, "limit": 10000001}`, "limit must be from 1 to 10000000"},
		{`{"action": "cancel", "filter": {"definition": "bulk-job"}, "limit": "10"}`, "limit"},
		{`{"action": "cancel", "filter": {"search": {"n": [1]}}}`, "filter.search.n: a search value is a string, a number or a boolean"},
		{`{"action": "cancel", "filter": {"search": {"n": null}}}`, "filter.search.n"},
		{`{"action": "cancel", "filter": {"search": {"Bad-Name": "x"}}}`, `filter.search: name \"Bad-Name\"`},
		{`{"action": "cancel", "filter": {"id_prefix": "a b"}}`, "filter.id_prefix"},
		{`{"action": "cancel", "filter": {"parent": "a b"}}`, "filter.parent"},
		{`{"action": "cancel", "filter": {"definition": "bulk-job"}, "extra": 1}`, "extra"},
		{`{"action": "cancel", "filter": {"nope": 1}}`, "nope"},
		{`{"action": "cancel", "filter": {"definition": "bulk-job"}`, "invalid JSON"},
		{``, "request body is empty"},
	} {
		r := a.do("POST", "/v1/bulk", tc.body)
		expect(t, r, 400, "POST /v1/bulk "+tc.body)
		if !bytes.Contains(r.body, []byte(tc.want)) {
			t.Errorf("POST /v1/bulk %s: %s, want a message with %q", tc.body, r.body, tc.want)
		}
	}
	// Every problem at once.
	r = a.do("POST", "/v1/bulk", `{"action": "explode", "filter": {"created_after": "soon"}, "limit": -1}`)
	expect(t, r, 400, "several problems")
	var e struct{ Problems []string }
	if json.Unmarshal(r.body, &e); len(e.Problems) != 3 {
		t.Errorf("several problems: %s, want 3 listed", r.body)
	}
	for _, tc := range []struct{ query, want string }{
		{"", "the filter is empty"},
		{"?status=SLEEPING", "unknown status"},
		{"?created_before=tomorrow", "filter.created_before"},
	} {
		r := a.do("GET", "/v1/bulk/count"+tc.query, "")
		expect(t, r, 400, "count "+tc.query)
		if !bytes.Contains(r.body, []byte(tc.want)) {
			t.Errorf("GET /v1/bulk/count%s: %s, want %q", tc.query, r.body, tc.want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?status=SLEEPING"} {
		expect(t, a.do("GET", "/v1/bulk"+q, ""), 400, "list "+q)
	}
	expect(t, a.do("POST", "/v1/bulk/"+op.ID+"/cancel", `{"x": 1}`), 400, "cancel with a body")

	// None of the refused ones was stored.
	r = a.do("GET", "/v1/bulk", "")
	if r.json(t, &list); len(list.Operations) != 1 {
		t.Errorf("refused operations were stored: %s", r.body)
	}
}
