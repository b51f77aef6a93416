package apitest

import (
	"strings"
	"testing"
)

// testCodeWorkflows walks a code workflow's run through its routes: the
// poll delivers the run with its journal, a checkpoint records a step
// (and a replay of it gets the recorded entry), ctx.set writes a variable,
// a suspend ends the run waiting, and its lease then records nothing.
func testCodeWorkflows(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/order", "name: order\ncode: {handler: order}\n"), 201, "code definition")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"c-1","definition":"order","input":{"n":1}}`), 201, "start")
	r := a.do("POST", "/v1/tasks/poll", `{"worker":"w","handlers":["order"],"wait_seconds":5}`)
	expect(t, r, 200, "poll")
	var run struct {
		TaskID  string         `json:"task_id"`
		Lease   string         `json:"lease"`
		Kind    string         `json:"kind"`
		Journal map[string]any `json:"journal"`
	}
	r.json(t, &run)
	if run.Kind != "workflow" || run.Journal == nil || len(run.Journal) != 0 {
		t.Fatalf("poll answered %s, want a run (kind workflow) with an empty journal", r.body)
	}
	base := "/v1/tasks/" + run.TaskID
	r = a.do("POST", base+"/steps/a", `{"lease":"`+run.Lease+`","output":{"x":1}}`)
	expect(t, r, 200, "checkpoint")
	again := a.do("POST", base+"/steps/a", `{"lease":"`+run.Lease+`","output":{"x":2}}`)
	expect(t, again, 200, "checkpoint again")
	if !strings.Contains(string(again.body), `"x":1`) {
		t.Errorf("a recorded step checkpointed again answered %s, want the recorded output", again.body)
	}
	expect(t, a.do("POST", base+"/variables/stage", `{"lease":"`+run.Lease+`","value":"paid"}`), 200, "set")
	expect(t, a.do("POST", base+"/suspend", `{"lease":"`+run.Lease+`","waits":{"nap":{"sleep":"1h"}}}`), 200, "suspend")
	expect(t, a.do("POST", base+"/steps/b", `{"lease":"`+run.Lease+`","output":1}`), 409, "checkpoint of a suspended run")
	// The runs' bookkeeping is the engine's: a forged run number would
	// fence off the real run.
	r = a.do("PATCH", "/v1/workflows/c-1", `{"code":{"run":7,"seq":0}}`, "If-Match", "*")
	expect(t, r, 409, "patch of state.code")
	if !strings.Contains(string(r.body), "state.code is owned by the engine") {
		t.Errorf("patch of state.code answered %s", r.body)
	}
	g := a.do("GET", "/v1/workflows/c-1", "")
	if got := stepStatuses(t, g); got["a"] != "COMPLETED" || got["nap"] != "WAITING" || !strings.Contains(string(g.body), `"stage":"paid"`) {
		t.Errorf("the workflow after the run: %s", g.body)
	}
}
