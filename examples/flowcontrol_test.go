package examples

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// examples/flowcontrol/tenant-sync.yaml runs on a real server: its
// iterations, held to one per tenant and to the shared API's rate, all
// complete, in item order, and the instance has the definition's priority.
func TestTenantSyncExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := exampleServer(t, func(_ context.Context, t engine.Task) (json.RawMessage, error) { return t.Input, nil })
	body, err := os.ReadFile("flowcontrol/tenant-sync.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutDefinition(ctx, "tenant-sync", body); err != nil {
		t.Fatal(err)
	}
	input := `{"records": [{"tenant": "acme", "id": 1}, {"tenant": "acme", "id": 2}, {"tenant": "globex", "id": 3}, {"tenant": "acme", "id": 4}, {"tenant": "globex", "id": 5}, {"tenant": "initech", "id": 6}, {"tenant": "acme", "id": 7}]}`
	created, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "ts-1", Definition: "tenant-sync", Input: json.RawMessage(input)})
	if err != nil {
		t.Fatal(err)
	}
	if created.Priority != 4 {
		t.Errorf("priority %d, want the definition's 4", created.Priority)
	}
	var inst *workflow.Instance
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if inst, err = c.GetWorkflow(ctx, "ts-1"); err != nil {
			t.Fatal(err)
		}
		if inst.Status != workflow.StatusRunning || time.Now().After(deadline) {
			break
		}
	}
	if inst.Status != workflow.StatusCompleted {
		t.Fatalf("ts-1 is %s: %+v", inst.Status, inst.State.Steps)
	}
	want := `[{"record":1,"tenant":"acme"},{"record":2,"tenant":"acme"},{"record":3,"tenant":"globex"},{"record":4,"tenant":"acme"},{"record":5,"tenant":"globex"},{"record":6,"tenant":"initech"},{"record":7,"tenant":"acme"}]`
	if got := string(inst.State.Steps["sync"].Output); got != want {
		t.Errorf("sync output %s, want %s", got, want)
	}
}
