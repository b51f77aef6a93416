package examples

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// examples/approval-or-timeout.yaml end to end, twice: the approval wins
// the race (the order ships, the timer is withdrawn); then, with the timer
// shortened, the timer wins (the order is escalated, and the approval that
// comes too late is refused with 409).
func TestApprovalOrTimeoutExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := exampleServer(t, func(_ context.Context, tk engine.Task) (json.RawMessage, error) { return tk.Input, nil }, "approval-or-timeout")
	def, err := os.ReadFile("approval-or-timeout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wait := func(id string, ok func(*workflow.Instance) bool) *workflow.Instance {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			inst, err := c.GetWorkflow(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok(inst) {
				return inst
			}
			if time.Now().After(deadline) {
				t.Fatalf("workflow %s: gave up waiting; it is %s with steps %v", id, inst.Status, steps(inst))
			}
		}
	}
	completed := func(inst *workflow.Instance) bool { return inst.Status == workflow.StatusCompleted }

	// The approval wins.
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "approved", Definition: "approval-or-timeout", Input: json.RawMessage(`{"order": "o-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	wait(inst.ID, func(i *workflow.Instance) bool { return i.State.Steps["approve"].Status == workflow.StepWaiting })
	if _, err := c.CompleteStep(ctx, inst.ID, "approve", "*", json.RawMessage(`{"approved": true, "by": "ana"}`)); err != nil {
		t.Fatal(err)
	}
	inst = wait(inst.ID, completed)
	want := map[string]workflow.StepStatus{"approve": workflow.StepCompleted, "timeout": workflow.StepSkipped,
		"decide": workflow.StepCompleted, "ship": workflow.StepCompleted, "escalate": workflow.StepSkipped}
	checkSteps(t, inst, want)
	if got := string(inst.Output); got != `{"escalated":null,"order":"o-1","shipped":{"approval":{"approved":true,"by":"ana"},"order":"o-1"}}` {
		t.Errorf("output of the approved order: %s", got)
	}

	// The timer wins: the same definition with a short timer.
	short := strings.Replace(string(def), "duration: 1h", "duration: 200ms", 1)
	if _, _, err := c.PutDefinition(ctx, "approval-or-timeout", []byte(short)); err != nil {
		t.Fatal(err)
	}
	inst, err = c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "timed-out", Definition: "approval-or-timeout", Input: json.RawMessage(`{"order": "o-2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	inst = wait(inst.ID, completed)
	want = map[string]workflow.StepStatus{"approve": workflow.StepSkipped, "timeout": workflow.StepCompleted,
		"decide": workflow.StepCompleted, "ship": workflow.StepSkipped, "escalate": workflow.StepCompleted}
	checkSteps(t, inst, want)
	if got := string(inst.Output); got != `{"escalated":{"order":"o-2","reason":"no approval within the hour"},"order":"o-2","shipped":null}` {
		t.Errorf("output of the escalated order: %s", got)
	}
	if _, err := c.CompleteStep(ctx, inst.ID, "approve", "*", json.RawMessage(`{"approved": true}`)); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("a late approval: %v, want 409", err)
	}
}

func steps(inst *workflow.Instance) map[string]workflow.StepStatus {
	m := map[string]workflow.StepStatus{}
	for id, st := range inst.State.Steps {
		m[id] = st.Status
	}
	return m
}

func checkSteps(t *testing.T, inst *workflow.Instance, want map[string]workflow.StepStatus) {
	t.Helper()
	got := steps(inst)
	for id, st := range want {
		if got[id] != st {
			t.Errorf("workflow %s: step %s is %s, want %s (all: %v)", inst.ID, id, got[id], st, got)
		}
	}
}
