package apitest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

const swGreet = `document:
  dsl: '1.0.0'
  namespace: test
  name: sw-greet
  version: '1.0.0'
do:
  - greet:
      call: greeter
      with:
        name: ${ .name }
  - acknowledged:
      listen:
        to:
          one:
            with:
              type: com.example.greeting.acknowledged
`

// testServerless checks Serverless Workflow documents through the API: a
// PUT validates them (400 listing every problem by its JSON pointer, the
// name must be the document's), GET shows the document, a start runs its
// first task (here a call a remote worker polls for), a task the worker
// fails faults the instance, whose `error` object the API shows; such an
// instance cannot be retried, and an item cannot be completed through the
// steps route.
func testServerless(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/sw-greet", swGreet, "Content-Type", "application/yaml"), 201, "PUT a document")
	r := a.do("GET", "/v1/definitions/sw-greet", "")
	expect(t, r, 200, "GET the definition")
	var def struct {
		Definition struct {
			Document struct{ Name, DSL string }
			Do       []map[string]json.RawMessage
		}
	}
	r.json(t, &def)
	if def.Definition.Document.Name != "sw-greet" || len(def.Definition.Do) != 2 {
		t.Errorf("GET shows %s, want the document", r.body)
	}

	r = a.do("PUT", "/v1/definitions/sw-bad", `document: {dsl: '1.0.0', namespace: test, name: sw-bad, version: '1.0.0'}
do:
  - build:
      run:
        container: {image: alpine}
  - jump:
      set: {a: 1}
      then: nowhere
`, "Content-Type", "application/yaml")
	expect(t, r, 400, "PUT an invalid document")
	for _, want := range []string{"/do/0/build", "/do/1/jump"} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("the problems do not name %s: %s", want, r.body)
		}
	}
	r = a.do("PUT", "/v1/definitions/another", swGreet, "Content-Type", "application/yaml")
	expect(t, r, 400, "PUT under another name")
	if !bytes.Contains(r.body, []byte("/document/name")) {
		t.Errorf("a name mismatch: %s", r.body)
	}

	for _, id := range []string{"sw-1", "sw-2"} {
		expect(t, a.do("POST", "/v1/workflows", `{"id":"`+id+`","definition":"sw-greet","input":{"name":"ada"}}`), 201, "start "+id)
	}
	poll := func() httpapi.TaskResponse {
		t.Helper()
		r := a.do("POST", "/v1/tasks/poll", `{"worker":"w1","handlers":["greeter"]}`)
		expect(t, r, 200, "poll greeter")
		var task httpapi.TaskResponse
		r.json(t, &task)
		if string(task.Input) != `{"name":"ada"}` {
			t.Errorf("the call's input is %s, want its evaluated with", task.Input)
		}
		return task
	}
	first, second := poll(), poll()
	expect(t, a.do("POST", "/v1/tasks/"+first.TaskID+"/complete", `{"lease":"`+first.Lease+`","output":{"greeting":"hi ada"}}`), 200, "complete the call")
	r = a.do("GET", "/v1/workflows/"+first.WorkflowID+"/history", "")
	expect(t, r, 200, "history")
	if !bytes.Contains(r.body, []byte(`"task /do/0/greet completed"`)) {
		t.Errorf("history after the call: %s", r.body)
	}
	// The next task waits for an event: an item is not a step the API
	// completes.
	var running struct {
		State struct {
			Steps map[string]struct{ Status string }
			SW    struct {
				Pending map[string]struct{ Kind, Pointer string }
			} `json:"sw"`
		}
	}
	r = a.do("GET", "/v1/workflows/"+first.WorkflowID, "")
	r.json(t, &running)
	if len(running.State.SW.Pending) != 1 {
		t.Fatalf("after the call: %s", r.body)
	}
	for item, p := range running.State.SW.Pending {
		if p.Pointer != "/do/1/acknowledged" || p.Kind != "listen" || running.State.Steps[item].Status != "WAITING" {
			t.Errorf("pending %s = %+v, steps %v", item, p, running.State.Steps)
		}
		r = a.do("POST", "/v1/workflows/"+first.WorkflowID+"/steps/"+item+"/complete", `{"output":1}`, "If-Match", "*")
		expect(t, r, 409, "complete an item through the steps route")
		if !bytes.Contains(r.body, []byte("Serverless Workflow")) {
			t.Errorf("409 body: %s", r.body)
		}
	}

	expect(t, a.do("POST", "/v1/tasks/"+second.TaskID+"/fail", `{"lease":"`+second.Lease+`","error":"greeter is down"}`), 200, "fail the call")
	r = a.do("GET", "/v1/workflows/"+second.WorkflowID, "")
	var failed struct {
		Status string
		Error  map[string]any
	}
	r.json(t, &failed)
	e := failed.Error
	if failed.Status != "FAILED" || e["type"] != "https://serverlessworkflow.io/spec/1.0.0/errors/runtime" || e["status"] != 500.0 ||
		e["instance"] != "/do/0/greet" || !strings.Contains(e["detail"].(string), "greeter is down") {
		t.Errorf("a faulted instance: %s", r.body)
	}
	r = a.do("POST", "/v1/workflows/"+second.WorkflowID+"/retry", "")
	expect(t, r, 409, "retry a faulted Serverless Workflow instance")
	// The interpreter's state is the engine's; the rest of the state is not.
	r = a.do("PATCH", "/v1/workflows/"+first.WorkflowID, `{"sw":{"pending":{}}}`, "If-Match", "*")
	expect(t, r, 409, "patch state.sw")
	if !bytes.Contains(r.body, []byte("state.sw is owned by the engine")) {
		t.Errorf("409 body: %s", r.body)
	}
	expect(t, a.do("PATCH", "/v1/workflows/"+first.WorkflowID, `{"note":"kept"}`, "If-Match", "*"), 200, "patch another key")
	expect(t, a.do("POST", "/v1/workflows/"+first.WorkflowID+"/cancel", ""), 200, "cancel")
}
