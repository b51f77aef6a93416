package engine_test

import (
	"context"
	"testing"

	"github.com/flowd/flowd/engine"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// wantNoActiveTasks checks, with no sweep having run since the write,
// that instance id keeps no QUEUED or LEASED task: the write that stopped
// it cancelled them.
func (n *node) wantNoActiveTasks(what, id string) {
	n.t.Helper()
	rows, err := n.st.TasksOfInstance(context.Background(), id, store.LockNone)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, r := range rows {
		if r.Status == store.TaskQueued || r.Status == store.TaskLeased {
			n.t.Errorf("%s: task %s of step %s is %s, want it cancelled by the write that stopped %s", what, r.ID, r.StepID, r.Status, id)
		}
	}
}

// A step that fails the instance cancels the other steps' tasks in that
// write, the LEASED one of a worker included: no sweep needed.
func TestFailureCancelsOtherTasksAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noSweeps: true})
		n.define(parallelDef)
		ctx := context.Background()
		inst := n.start("par", "fo-1", "")
		leased := map[string]*engine.Task{}
		for range 2 {
			task := n.poll()
			leased[task.Step] = task
		}
		if err := n.eng.FailTask(ctx, leased["a"].ID, leased["a"].Lease, "card declined", false); err != nil {
			t.Fatal(err)
		}
		failed, err := n.st.Get(ctx, inst.ID)
		if err != nil || failed.Status != workflow.StatusFailed {
			t.Fatalf("instance: %v, %v; want FAILED", failed, err)
		}
		n.wantNoActiveTasks("after a failed", inst.ID)
	})
}
