package examples

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// examples/payment-event.yaml end to end on a real server: an order waits
// for its payment event, which POST /v1/events delivers, and ships with the
// event's data. An event published after the order was created but before
// it waited is taken when it starts waiting.
func TestPaymentEventExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	c := exampleServer(t, func(ctx context.Context, task worker.Task) (json.RawMessage, error) {
		if task.Step == "reserve" && task.WorkflowID == "early" {
			<-release // the payment comes before the order waits for it
		}
		return task.Input, nil
	}, "payment-event")
	for _, id := range []string{"o-1", "early"} {
		if _, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: id, Definition: "payment-event", Input: json.RawMessage(`{"id": "` + id + `", "sku": "A-1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, c, "o-1", func(inst *workflow.Instance) bool { return inst.State.Steps["paid"].Status == workflow.StepWaiting })
	pub, err := c.PublishEvent(ctx, "payment", "o-1", json.RawMessage(`{"amount": 42, "currency": "EUR"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pub.Delivered, []string{"o-1"}) {
		t.Errorf("delivered = %v, want [o-1]", pub.Delivered)
	}
	done := waitFor(t, c, "o-1", func(inst *workflow.Instance) bool { return inst.Status == workflow.StatusCompleted })
	if got := string(done.State.Steps["ship"].Output); got != `{"order":"o-1","paid":{"amount":42,"currency":"EUR"}}` {
		t.Errorf("ship's output = %s", got)
	}

	// "early" is still reserving: its payment is stored, and taken when
	// its wait step starts.
	if pub, err := c.PublishEvent(ctx, "payment", "early", json.RawMessage(`{"amount": 7}`)); err != nil || len(pub.Delivered) != 0 {
		t.Fatalf("early payment: %+v, %v; want nobody waiting yet", pub, err)
	}
	close(release)
	done = waitFor(t, c, "early", func(inst *workflow.Instance) bool { return inst.Status == workflow.StatusCompleted })
	if got := string(done.State.Steps["paid"].Output); got != `{"amount":7}` {
		t.Errorf("early's paid output = %s", got)
	}
}
