package examples

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// examples/deploy.yaml end to end on a real server: a second deploy of one
// environment is QUEUED until the first is verified; another environment's
// runs at once.
func TestDeployExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := exampleServer(t, func(_ context.Context, task worker.Task) (json.RawMessage, error) { return task.Input, nil }, "deploy")
	start := func(id, env string) *workflow.Instance {
		t.Helper()
		inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: id, Definition: "deploy",
			Input: json.RawMessage(`{"environment": "` + env + `", "version": "1.4.0"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	if inst := start("d-1", "prod"); inst.Status != workflow.StatusRunning {
		t.Fatalf("d-1: %s", inst.Status)
	}
	if inst := start("d-2", "prod"); inst.Status != workflow.StatusQueued {
		t.Fatalf("d-2, a second prod deploy: %s, want QUEUED", inst.Status)
	}
	if inst := start("s-1", "staging"); inst.Status != workflow.StatusRunning {
		t.Fatalf("s-1, another environment: %s", inst.Status)
	}
	waitFor(t, c, "d-1", func(inst *workflow.Instance) bool { return inst.State.Steps["verify"].Status == workflow.StepWaiting })
	if _, err := c.CompleteStep(ctx, "d-1", "verify", "*", json.RawMessage(`{"ok": true}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "d-1", func(inst *workflow.Instance) bool { return inst.Status == workflow.StatusCompleted })
	waitFor(t, c, "d-2", func(inst *workflow.Instance) bool { return inst.State.Steps["verify"].Status == workflow.StepWaiting })
}
