package apitest

import (
	"bytes"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// testFlowControl checks a definition's priority, a start's override of
// it, the 400s of bad values, and what remote workers get: higher
// priorities first, and no more leased tasks of a concurrency key than its
// limit.
func testFlowControl(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	for _, c := range []struct{ name, body, want string }{
		{"priority 0", "name: p\npriority: 0\nsteps:\n  - {id: a, type: task, handler: h}", "priority: must be 1–5, not 0"},
		{"priority 9", "name: p\npriority: 9\nsteps:\n  - {id: a, type: task, handler: h}", "priority: must be 1–5, not 9"},
		{"limit 0", "name: p\nsteps:\n  - {id: a, type: task, handler: h, concurrency: {key: k, limit: 0}}", "concurrency.limit: must be at least 1, not 0"},
		{"no key", "name: p\nsteps:\n  - {id: a, type: task, handler: h, concurrency: {limit: 2}}", "concurrency.key: is required"},
		{"rate 0", "name: p\nsteps:\n  - {id: a, type: task, handler: h, rate_limit: {per_second: 0}}", "rate_limit.per_second: must be more than 0"},
		{"burst 0", "name: p\nsteps:\n  - {id: a, type: task, handler: h, rate_limit: {per_second: 1, burst: 0}}", "rate_limit.burst: must be 1–1000000, not 0"},
		{"on a wait step", "name: p\nsteps:\n  - {id: a, type: wait, concurrency: {key: k, limit: 1}}", "only task and http steps have a concurrency key"},
	} {
		r := a.do("PUT", "/v1/definitions/p", c.body)
		expect(t, r, 400, c.name)
		if !bytes.Contains(r.body, []byte(c.want)) {
			t.Errorf("%s: %s, want a message with %q", c.name, r.body, c.want)
		}
	}
	expect(t, a.do("PUT", "/v1/definitions/low", "name: low\npriority: 1\nsteps:\n  - {id: a, type: task, handler: tf-order}"), 201, "definition low")
	expect(t, a.do("PUT", "/v1/definitions/keyed", `name: keyed
steps:
  - {id: a, type: task, handler: tf-keyed, concurrency: {key: "tenant-{{ .input.tenant }}", limit: 1}}
`), 201, "definition keyed")

	// The definition's priority, and a start's override.
	r := a.do("POST", "/v1/workflows", `{"id":"p-low","definition":"low"}`)
	expect(t, r, 201, "start low")
	if got := r.instance(t)["priority"]; got != 1.0 {
		t.Errorf("priority of an instance of low: %v, want 1", got)
	}
	r = a.do("POST", "/v1/workflows", `{"id":"p-high","definition":"low","priority":5}`)
	expect(t, r, 201, "start high")
	if got := r.instance(t)["priority"]; got != 5.0 {
		t.Errorf("priority given 5: %v", got)
	}
	if got := a.do("GET", "/v1/workflows/p-high", "").instance(t)["priority"]; got != 5.0 {
		t.Errorf("priority read back: %v", got)
	}
	for _, c := range []struct{ body, want string }{
		{`{"definition":"low","priority":0}`, `priority\" must be 1–5, not 0`},
		{`{"definition":"low","priority":6}`, `priority\" must be 1–5, not 6`},
		{`{"definition":"low","priority":-1}`, `priority\" must be 1–5, not -1`},
		{`{"definition":"low","priority":"high"}`, `priority`},
		{`{"definition":"low","priority":2.5}`, `priority`},
	} {
		r := a.do("POST", "/v1/workflows", c.body)
		expect(t, r, 400, c.body)
		if !bytes.Contains(r.body, []byte(c.want)) {
			t.Errorf("%s: %s, want a message with %q", c.body, r.body, c.want)
		}
	}
	// The higher priority is delivered first, though started later.
	var task httpapi.TaskResponse
	r = a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["tf-order"]}`)
	expect(t, r, 200, "poll by priority")
	r.json(t, &task)
	if task.WorkflowID != "p-high" {
		t.Errorf("first delivery is of %s, want p-high (priority 5 before 1)", task.WorkflowID)
	}

	// One leased task per tenant: the second of tenant a waits for the
	// first, tenant b's goes at once.
	for _, s := range []struct{ id, tenant string }{{"k-1", "a"}, {"k-2", "a"}, {"k-3", "b"}} {
		expect(t, a.do("POST", "/v1/workflows", `{"id":"`+s.id+`","definition":"keyed","input":{"tenant":"`+s.tenant+`"}}`), 201, "start "+s.id)
	}
	poll := func() *httpapi.TaskResponse {
		t.Helper()
		r := a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["tf-keyed"]}`)
		if r.status == 204 {
			return nil
		}
		expect(t, r, 200, "poll keyed")
		var got httpapi.TaskResponse
		r.json(t, &got)
		return &got
	}
	first, second := poll(), poll()
	if first == nil || second == nil || first.WorkflowID != "k-1" || second.WorkflowID != "k-3" {
		t.Fatalf("deliveries %+v, %+v: want k-1, then k-3 (k-2 held back by tenant-a's limit)", first, second)
	}
	if third := poll(); third != nil {
		t.Fatalf("a third delivery %+v while tenant-a's one slot is taken", third)
	}
	expect(t, a.do("POST", "/v1/tasks/"+first.TaskID+"/complete", `{"lease":"`+first.Lease+`"}`), 200, "complete k-1")
	if next := poll(); next == nil || next.WorkflowID != "k-2" {
		t.Errorf("after k-1 completed: %+v, want k-2", next)
	}
}
