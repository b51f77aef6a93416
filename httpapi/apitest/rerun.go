package apitest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// testRerun: a finished workflow re-run from a step delivers that step and
// those after it to the worker again, and not the steps before it, whose
// outputs the re-run keeps; the two link each other; each mistake has its
// status code.
func testRerun(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/relay", `name: relay
steps:
  - {id: a, type: task, handler: relay-leg}
  - {id: b, type: task, handler: relay-leg, depends_on: [a], input: {got: '{{ .steps.a.output }}'}}
  - {id: c, type: task, handler: relay-leg, depends_on: [b]}
`), 201, "the relay definition")
	// work plays the worker until id finishes, and returns the steps it
	// was given, in order.
	work := func(id string) []string {
		t.Helper()
		var steps []string
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			r := a.do("POST", "/v1/tasks/poll", `{"worker":"relay-w","handlers":["relay-leg"],"wait_seconds":0.2}`)
			if r.status == 204 {
				inst := a.do("GET", "/v1/workflows/"+id, "").instance(t)
				if inst["status"] == "COMPLETED" {
					return steps
				}
				continue
			}
			expect(t, r, 200, "poll a leg")
			var task httpapi.TaskResponse
			r.json(t, &task)
			if task.WorkflowID != id {
				t.Fatalf("polled a task of %s while %s runs", task.WorkflowID, id)
			}
			steps = append(steps, task.Step)
			out := fmt.Sprintf(`{"lease":%q,"output":{"leg":%q,"input":%s}}`, task.Lease, task.Step, task.Input)
			expect(t, a.do("POST", "/v1/tasks/"+task.TaskID+"/complete", out), 200, "complete "+task.Step)
		}
		t.Fatalf("%s did not complete; legs run: %v", id, steps)
		return nil
	}
	expect(t, a.do("POST", "/v1/workflows", `{"id":"relay-1","definition":"relay","input":{"n":1}}`), 201, "start")
	if got := work("relay-1"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("the first run ran %v", got)
	}
	r := a.do("POST", "/v1/workflows/relay-1/rerun", `{"from":"b","id":"relay-1b"}`)
	expect(t, r, 201, "re-run from b")
	if loc := r.header.Get("Location"); loc != "/v1/workflows/relay-1b" {
		t.Errorf("Location %q", loc)
	}
	re := r.instance(t)
	if re["rerun_of"] != "relay-1" || re["status"] != "RUNNING" || re["version"] != 0.0 {
		t.Errorf("the re-run as created: %s", r.body)
	}
	if got := work("relay-1b"); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("the re-run from b ran %v, want [b c]", got)
	}
	orig := a.do("GET", "/v1/workflows/relay-1", "").instance(t)
	done := a.do("GET", "/v1/workflows/relay-1b", "").instance(t)
	stepOf := func(inst map[string]any, id string) map[string]any {
		return inst["state"].(map[string]any)["steps"].(map[string]any)[id].(map[string]any)
	}
	if fmt.Sprint(stepOf(orig, "a")) != fmt.Sprint(stepOf(done, "a")) {
		t.Errorf("a of the re-run %v, of the original %v: want the record kept", stepOf(done, "a"), stepOf(orig, "a"))
	}
	if reruns, _ := orig["reruns"].([]any); len(reruns) != 1 || reruns[0] != "relay-1b" {
		t.Errorf("the original lists re-runs %v", orig["reruns"])
	}
	page := a.do("GET", "/v1/workflows?rerun_of=relay-1", "")
	expect(t, page, 200, "list the re-runs")
	if !strings.Contains(string(page.body), `"id":"relay-1b"`) || strings.Contains(string(page.body), `"id":"relay-1"`) {
		t.Errorf("?rerun_of=relay-1: %s", page.body)
	}
	for _, c := range []struct {
		id, body string
		status   int
		msg      string
	}{
		{"relay-9", `{"from":"a"}`, 404, `workflow \"relay-9\"`},
		{"relay-1", `{"from":"z"}`, 400, `its steps: a, b, c`},
		{"relay-1", `{"from":"a","from_seq":1}`, 400, `not both`},
		{"relay-1", `{"from_seq":1}`, 400, `give \"from\"`},
		{"relay-1", `{"from":"a","id":"relay-1b"}`, 409, `relay-1b`},
	} {
		r := a.do("POST", "/v1/workflows/"+c.id+"/rerun", c.body)
		expect(t, r, c.status, "rerun of "+c.id+" with "+c.body)
		if !strings.Contains(string(r.body), c.msg) {
			t.Errorf("rerun of %s with %s: %s, want %q in it", c.id, c.body, r.body, c.msg)
		}
	}
	expect(t, a.do("POST", "/v1/workflows", `{"id":"relay-2","definition":"relay"}`), 201, "start another")
	r = a.do("POST", "/v1/workflows/relay-2/rerun", `{"from":"a"}`)
	expect(t, r, 409, "rerun of a running workflow")
	if !strings.Contains(string(r.body), "is RUNNING") {
		t.Errorf("rerun of a running workflow: %s", r.body)
	}
	expect(t, a.do("POST", "/v1/workflows/relay-2/cancel", ""), 200, "cancel it")
}
