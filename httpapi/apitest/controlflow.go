package apitest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Control flow through the API: a `join: first` withdraws the other wait
// step, whose completion is then a 409; the instance's output appears on
// GET and in the list once it completes, and not before.
func testControlFlow(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	expect(t, a.do("PUT", "/v1/definitions/flow", `name: flow
steps:
  - {id: yes, type: wait}
  - {id: no, type: wait}
  - {id: decide, type: wait, depends_on: [yes, no], join: first}
  - {id: note, type: wait, when: '.input.note'}
output: {approved: "{{ .steps.yes.output }}", rejected: "{{ .steps.no.output }}", decision: "{{ .steps.decide.output }}"}
`), 201, "definition")
	r := a.do("POST", "/v1/workflows", `{"id":"cf-1","definition":"flow","input":{"note":false}}`)
	expect(t, r, 201, "start")
	if _, ok := r.instance(t)["output"]; ok {
		t.Errorf("a running instance has an output: %s", r.body)
	}
	if got := stepStatuses(t, r); got["note"] != "SKIPPED" || got["yes"] != "WAITING" {
		t.Errorf("steps at start: %v", got)
	}
	expect(t, a.do("POST", "/v1/workflows/cf-1/steps/yes/complete", `{"output":{"by":"ann"}}`, "If-Match", `*`), 200, "approve")
	r = a.do("POST", "/v1/workflows/cf-1/steps/no/complete", `{"output":1}`, "If-Match", `*`)
	expect(t, r, 409, "completing the withdrawn wait step")
	if !bytes.Contains(r.body, []byte("SKIPPED")) {
		t.Errorf("the 409 should say the step is SKIPPED: %s", r.body)
	}
	r = a.do("POST", "/v1/workflows/cf-1/steps/decide/complete", `{"output":"ship"}`, "If-Match", `"1"`)
	expect(t, r, 200, "decide")
	const want = `{"approved":{"by":"ann"},"decision":"ship","rejected":null}`
	for what, body := range map[string][]byte{"the completion's answer": r.body, "GET": a.do("GET", "/v1/workflows/cf-1", "").body} {
		var inst struct {
			Status string
			Output rawJSON
		}
		resp{body: body}.json(t, &inst)
		if inst.Status != "COMPLETED" || string(inst.Output) != want {
			t.Errorf("%s: %s with output %s, want COMPLETED with %s", what, inst.Status, inst.Output, want)
		}
	}
	var list struct {
		Workflows []struct {
			ID     string
			Output rawJSON
		}
	}
	a.do("GET", "/v1/workflows?definition=flow", "").json(t, &list)
	if len(list.Workflows) != 1 || string(list.Workflows[0].Output) != want {
		t.Errorf("listed: %+v", list.Workflows)
	}
}

// rawJSON keeps a field's JSON as it is, compacted.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*r = buf.Bytes()
	return nil
}
