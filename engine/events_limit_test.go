package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// An event that a waiting step cannot record (its instance's state would
// pass the limit with the event's data) fails that step, with an error
// saying why, and the publish lists it in Failed; a waiter with room takes
// the same event as before. Before, the publish returned an error, the
// step stayed WAITING and the sweeper tried again for ever.
func TestEventTooLargeFailsTheWaitingStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{maxState: 1500})
		n.define("name: pay\nsteps:\n  - {id: paid, type: wait, event: payment, key: \"{{ .input.order }}\"}\n")
		n.define(`
document: {dsl: '1.0.0', namespace: test, name: listen, version: '1.0.0'}
do:
  - paid:
      listen:
        to:
          one:
            with: {type: payment, subject: o-1}
  - after:
      set: {done: true}
`)
		ctx := context.Background()
		small := n.start("pay", "small", `{"order":"o-1"}`)
		bulky, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "bulky", Definition: "pay", Input: json.RawMessage(`{"order":"o-1"}`),
			State: &workflow.State{Variables: map[string]json.RawMessage{"pad": json.RawMessage(`"` + strings.Repeat("p", 900) + `"`)}}})
		if err != nil {
			t.Fatal(err)
		}
		// The next task's frame holds the event twice (its raw and
		// transformed input).
		sw := n.start("listen", "sw", "")
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := n.st.Get(ctx, sw.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.State.Steps) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the listen task is not waiting: %+v", got.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
		ev, err := n.eng.PublishEvent(ctx, "payment", "o-1", json.RawMessage(`"`+strings.Repeat("d", 1000)+`"`))
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		if !slices.Equal(ev.Delivered, []string{small.ID}) {
			t.Errorf("delivered %v, want [%s]", ev.Delivered, small.ID)
		}
		slices.SortFunc(ev.Failed, func(a, b engine.UndeliveredEvent) int { return strings.Compare(a.WorkflowID, b.WorkflowID) })
		if len(ev.Failed) != 2 || ev.Failed[0].WorkflowID != bulky.ID || ev.Failed[0].Step != "paid" || ev.Failed[1].WorkflowID != sw.ID {
			t.Fatalf("failed %+v", ev.Failed)
		}
		for _, f := range ev.Failed {
			if !strings.Contains(f.Error, `event "payment" (`+ev.Event.ID+`) cannot be delivered`) || !strings.Contains(f.Error, "more than --max-state-bytes (1500)") {
				t.Errorf("%s: error %q", f.WorkflowID, f.Error)
			}
		}
		n.waitStatus(small.ID, workflow.StatusCompleted, 5*time.Second)
		failed := n.waitStatus(bulky.ID, workflow.StatusFailed, 5*time.Second)
		if paid := failed.State.Steps["paid"]; paid.Status != workflow.StepFailed || paid.Error != ev.Failed[0].Error {
			t.Errorf("bulky's step: %+v", paid)
		}
		n.checkHistory(failed)
		faulted := n.waitStatus(sw.ID, workflow.StatusFailed, 5*time.Second)
		faulted.ShowError()
		if !strings.Contains(string(faulted.Error), "more than --max-state-bytes (1500)") {
			t.Errorf("sw's error %s", faulted.Error)
		}
		// Nothing waits any more: a second publish reaches nobody.
		again, err := n.eng.PublishEvent(ctx, "payment", "o-1", json.RawMessage(`1`))
		if err != nil || len(again.Delivered) != 0 || len(again.Failed) != 0 {
			t.Errorf("second publish: %+v, %v", again, err)
		}
	})
}
