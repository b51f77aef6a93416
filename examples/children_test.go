package examples

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// examples/order-lines.yaml runs examples/order-line.yaml as a child
// workflow per line item on a real server: the order completes with the
// children's outputs in line order, and the children are listed under
// their parent, each with its line's index.
func TestOrderLinesExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := exampleServer(t, func(_ context.Context, t engine.Task) (json.RawMessage, error) { return t.Input, nil }, "order-line", "order-lines")
	if _, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "ol-1", Definition: "order-lines", Input: json.RawMessage(`{"lines": [{"sku": "A-1", "quantity": 2}, {"sku": "B-7", "quantity": 1}, {"sku": "C-3", "quantity": 5}]}`)}); err != nil {
		t.Fatal(err)
	}
	var inst *workflow.Instance
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if inst, err = c.GetWorkflow(ctx, "ol-1"); err != nil {
			t.Fatal(err)
		}
		if inst.Status.Terminal() || inst.Status == workflow.StatusFailed || time.Now().After(deadline) {
			break
		}
	}
	if inst.Status != workflow.StatusCompleted {
		t.Fatalf("ol-1 is %s: %+v", inst.Status, inst.State.Steps)
	}
	lines := `[{"reserved":"2 × A-1","sku":"A-1"},{"reserved":"1 × B-7","sku":"B-7"},{"reserved":"5 × C-3","sku":"C-3"}]`
	if got, want := string(inst.State.Steps["ship"].Output), `{"lines":`+lines+`}`; got != want {
		t.Fatalf("ship output %s, want %s", got, want)
	}
	if got, want := string(inst.Output), `{"shipped":`+lines+`}`; got != want {
		t.Fatalf("order output %s, want %s", got, want)
	}
	page, err := c.ListWorkflows(ctx, client.ListOptions{Parent: "ol-1"})
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	if err := json.Unmarshal(inst.State.Steps["lines"].Extra["children"], &children); err != nil || len(children) != 3 {
		t.Fatalf("state.steps.lines.children = %s (%v)", inst.State.Steps["lines"].Extra["children"], err)
	}
	if len(page.Workflows) != 3 {
		t.Fatalf("children of ol-1: %+v", page.Workflows)
	}
	for _, child := range page.Workflows {
		p := child.Parent
		if child.Definition != "order-line" || p == nil || p.WorkflowID != "ol-1" || p.Step != "lines" || p.Index == nil || children[*p.Index] != child.ID {
			t.Fatalf("child %s of ol-1: %+v, parent %+v; children %v", child.ID, child, p, children)
		}
	}
}
