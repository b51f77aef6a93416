package ctk

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

// The harness's way of running a workflow — PUT as YAML, POST, poll until
// it stops, read the history — works on both stores with the API as it is,
// shown with a flowd definition (the kit's documents need the Serverless
// Workflow front end, TestCTK).
func TestHarnessExecutes(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, b.newDB(t))
			eng := newEngine(t, st, "harness", nil, map[string]engine.Handler{
				"double": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
					var in struct{ Value int }
					if err := json.Unmarshal(task.Input, &in); err != nil {
						return nil, err
					}
					return json.Marshal(map[string]int{"value": 2 * in.Value})
				},
			})
			srv, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
			if err != nil {
				t.Fatal(err)
			}
			r := &run{api: &api{h: srv}, name: "double", input: json.RawMessage(`{"value": 21}`),
				document: []byte("name: double\nsteps:\n  - {id: twice, type: task, handler: double, input: {value: \"{{ .input.value }}\"}}\noutput: \"{{ .steps.twice.output }}\"\n")}
			if err := execute(t.Context(), r, nil, ""); err != nil {
				t.Fatal(err)
			}
			if r.inst.Status != workflow.StatusCompleted || string(r.inst.Output) != `{"value":42}` {
				t.Errorf("instance %+v, output %s", r.inst, r.inst.Output)
			}
			if len(r.causes) < 2 || !strings.Contains(strings.Join(r.causes, "\n"), "twice") {
				t.Errorf("history causes %q", r.causes)
			}
			if err := shouldCompleteWith(t.Context(), r, nil, "value: 42\n"); err != nil {
				t.Error(err)
			}
			// A second PUT of another document under the same name is a new
			// revision, which the next start runs (the kit reuses names).
			r.document = []byte("name: double\nsteps:\n  - {id: once, type: task, handler: double, input: {value: 1}}\noutput: \"{{ .steps.once.output }}\"\n")
			if err := execute(t.Context(), r, nil, ""); err != nil {
				t.Fatal(err)
			}
			if string(r.inst.Output) != `{"value":2}` {
				t.Errorf("second run: output %s", r.inst.Output)
			}
		})
	}
}
