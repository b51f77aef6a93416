package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A batch to RUNNING decides what each instance it moves does outside its
// transaction, on the instance as the batch leaves it: an instance written
// between that decision and the batch's write is decided again, on what
// it has become, never written from the stale decision.
func TestBatchDecidesAgainForAnInstanceThatMoved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		h := newHolder(t, n)
		n.define("name: w3\nsteps:\n  - {id: a, type: wait}\n  - {id: b, type: wait}\n  - {id: c, type: wait, depends_on: [a, b]}\n")
		ctx := context.Background()
		n.start("w3", "moving", "")
		if _, err := n.eng.Action(ctx, "moving", "pause"); err != nil {
			t.Fatal(err)
		}
		n.complete("moving", "a")
		// While the batch's decision — on a completed, b waiting, so
		// nothing new to schedule — is held, b completes: c becomes ready.
		var ids []string
		h.around(t, 1, func(ctx context.Context) error {
			var err error
			ids, err = n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusPaused, NewStatus: workflow.StatusRunning,
				UpdatedBefore: time.Now().Add(time.Hour), Limit: 10})
			if err == nil && (len(ids) != 1 || ids[0] != "moving") {
				err = fmt.Errorf("the batch moved %v, want [moving]", ids)
			}
			return err
		}, func() { n.complete("moving", "b") })
		inst, err := n.st.Get(ctx, "moving")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != workflow.StatusRunning || inst.State.Steps["c"].Status != workflow.StepWaiting {
			t.Errorf("after the batch: %s with c %s; want RUNNING with c WAITING (scheduled on the instance as it became)", inst.Status, inst.State.Steps["c"].Status)
		}
		history := n.checkHistory(inst)
		if last := history[len(history)-1]; last.Cause != "batch PAUSED→RUNNING: resume" {
			t.Errorf("the last version's cause is %q, want the batch's resume", last.Cause)
		}
	})
}
