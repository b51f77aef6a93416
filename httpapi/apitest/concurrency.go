package apitest

import (
	"strings"
	"testing"
	"time"
)

// testConcurrency checks definition concurrency limits over HTTP: a bad
// concurrency block is a listed problem (400), a start over the limit is
// QUEUED and listed by ?status=QUEUED, a QUEUED instance can be cancelled,
// a retry over the limit and forcing a QUEUED instance to RUNNING over it
// are 409 with a message that says why.
func testConcurrency(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	r := a.do("PUT", "/v1/definitions/bad", "name: bad\nconcurrency: {limit: 0, strategy: lifo, key: '{{ .steps.x.output }}'}\nsteps:\n  - {id: w, type: wait}\n")
	expect(t, r, 400, "invalid concurrency")
	for _, want := range []string{"concurrency.limit", "concurrency.strategy", "concurrency.key"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("invalid concurrency: %s does not name %s", r.body, want)
		}
	}
	expect(t, a.do("PUT", "/v1/definitions/one", "name: one\nconcurrency: {key: '{{ .input.k }}', limit: 1}\nsteps:\n  - {id: w, type: wait}\n"), 201, "definition")
	start := func(id string) string {
		t.Helper()
		r := a.do("POST", "/v1/workflows", `{"id":"`+id+`","definition":"one","input":{"k":"a"}}`)
		expect(t, r, 201, "start "+id)
		return r.instance(t)["status"].(string)
	}
	if st := start("c1"); st != "RUNNING" {
		t.Fatalf("first start: %s", st)
	}
	if st := start("c2"); st != "QUEUED" {
		t.Fatalf("start over the limit: %s, want QUEUED", st)
	}
	start("c3")
	expect(t, a.do("POST", "/v1/workflows", `{"definition":"one","input":{}}`), 400, "a key that does not render")
	var page struct {
		Workflows []struct{ ID, Status string }
	}
	a.do("GET", "/v1/workflows?status=QUEUED", "").json(t, &page)
	if len(page.Workflows) != 2 || page.Workflows[0].ID != "c3" || page.Workflows[1].ID != "c2" {
		t.Errorf("?status=QUEUED: %+v, want c3 and c2", page.Workflows)
	}
	r = a.do("POST", "/v1/workflows/c2/status", `{"from":"QUEUED","to":"RUNNING"}`)
	expect(t, r, 409, "QUEUED → RUNNING over the limit")
	if !strings.Contains(string(r.body), "concurrency") {
		t.Errorf("409 over the limit says: %s", r.body)
	}
	r = a.do("POST", "/v1/batch/status", `{"status":"QUEUED","updated_before":"2100-01-01T00:00:00Z","new_status":"RUNNING","limit":10}`)
	expect(t, r, 409, "batch QUEUED → RUNNING over the limit")
	expect(t, a.do("POST", "/v1/workflows/c3/cancel", ""), 200, "cancel a QUEUED instance")
	expect(t, a.do("POST", "/v1/workflows/c3/status", `{"from":"QUEUED","to":"PAUSED"}`), 422, "QUEUED → PAUSED")
	// c1 fails; c2 takes its slot; a retry of c1 finds none.
	expect(t, a.do("POST", "/v1/workflows/c1/status", `{"from":"RUNNING","to":"FAILED"}`), 200, "fail c1")
	if got := waitStatus(t, a, "c2", "RUNNING"); got != "RUNNING" {
		t.Fatalf("c2 after c1 failed: %s", got)
	}
	r = a.do("POST", "/v1/workflows/c1/retry", "")
	expect(t, r, 409, "retry over the limit")
	if !strings.Contains(string(r.body), "concurrency key") {
		t.Errorf("409 retry says: %s", r.body)
	}
}

// waitStatus polls instance id until it has status want (or 10 seconds
// passed) and returns the status it last had.
func waitStatus(t *testing.T, a *api, id, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := a.do("GET", "/v1/workflows/"+id, "").instance(t)["status"].(string)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}
