package apitest

import (
	"sort"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// testForeachTasks: every iteration of a foreach step is a task of its own
// that a remote worker polls with its item's index; a definition using
// .item outside a foreach step is refused; the late completion of an
// iteration cancelled by another's failure is a 409.
func testForeachTasks(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	r := a.do("PUT", "/v1/definitions/no-item", "name: no-item\nsteps:\n  - {id: a, type: task, handler: fe, input: '{{ .item }}'}\n")
	expect(t, r, 400, ".item outside a foreach step")
	var e httpapi.ErrorBody
	r.json(t, &e)
	if want := `steps[0] (a): input: invalid reference "{{ .item }}": .item and .index are only defined in a step with foreach`; len(e.Problems) != 1 || e.Problems[0] != want {
		t.Errorf("problems %q, want %q", e.Problems, want)
	}
	expect(t, a.do("PUT", "/v1/definitions/each", `name: each
steps:
  - {id: a, type: task, handler: fe, foreach: .input.names, input: {name: '{{ .item }}', i: '{{ .index }}'}, retry: {max_attempts: 1}}
`), 201, "a foreach definition")
	expect(t, a.do("POST", "/v1/workflows", `{"id":"fe-1","definition":"each","input":{"names":["x","y"]}}`), 201, "start")
	var tasks []httpapi.TaskResponse
	for range 2 {
		r := a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["fe"],"wait_seconds":5}`)
		expect(t, r, 200, "poll an iteration")
		var task httpapi.TaskResponse
		r.json(t, &task)
		tasks = append(tasks, task)
	}
	for _, task := range tasks {
		if task.Index == nil {
			t.Fatalf("a polled iteration without an index: %+v", task)
		}
	}
	sort.Slice(tasks, func(i, j int) bool { return *tasks[i].Index < *tasks[j].Index })
	for i, task := range tasks {
		want := []string{`{"i":0,"name":"x"}`, `{"i":1,"name":"y"}`}[i]
		if task.Index == nil || *task.Index != i || string(task.Input) != want || task.IdempotencyKey != "fe-1/a/"+string(rune('0'+i)) {
			t.Errorf("iteration %d polled as %+v (index %d, input %s), want input %s", i, task, *task.Index, task.Input, want)
		}
	}
	expect(t, a.do("POST", "/v1/tasks/"+tasks[0].TaskID+"/fail", `{"lease":"`+tasks[0].Lease+`","error":"boom"}`), 200, "fail an iteration for good")
	r = a.do("POST", "/v1/tasks/"+tasks[1].TaskID+"/complete", `{"lease":"`+tasks[1].Lease+`","output":1}`)
	expect(t, r, 409, "the late completion of a cancelled iteration")
	inst := a.do("GET", "/v1/workflows/fe-1", "").instance(t)
	step := inst["state"].(map[string]any)["steps"].(map[string]any)["a"].(map[string]any)
	if inst["status"] != "FAILED" || step["error"] != "iteration 0: boom" {
		t.Errorf("after the failure: %v, step %v", inst["status"], step)
	}
}
