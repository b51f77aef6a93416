package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// wantNoActiveTasks checks, with no sweep having run since the write,
// that instance id keeps no QUEUED or LEASED task: the write that stopped
// it cancelled them.
func (n *node) wantNoActiveTasks(what, id string) {
	n.t.Helper()
	rows, err := n.st.TasksOfInstance(context.Background(), id)
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

// A transition of the API that is no action (RUNNING → COMPLETED, FAILED,
// TIMED_OUT) is the engine's one guarded write too: a child moved so
// carries its outcome to the parent's step, and its tasks are cancelled,
// in that write, with no sweep running.
func TestTransitionOfChildTellsParentAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{noSweeps: true})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n  - {id: later, type: task, handler: remote, depends_on: [approve]}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf, retry: {max_attempts: 1}}\n")
		for _, to := range []workflow.Status{workflow.StatusCompleted, workflow.StatusFailed} {
			inst := n.start("top", "tr-"+string(to), "")
			child := n.waitChild(inst.ID, "approve")
			out, err := n.eng.Transition(context.Background(), child.ID, workflow.StatusRunning, to)
			if err != nil || out.Status != to {
				t.Fatalf("transition to %s: %v, %v", to, out, err)
			}
			if got := out.State.Steps["approve"].Status; got != workflow.StepCancelled {
				t.Errorf("%s child: step approve is %s, want CANCELLED", to, got)
			}
			n.wantNoActiveTasks("child moved to "+string(to), child.ID)
			parent, err := n.st.Get(context.Background(), inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			if parent.Status != to {
				t.Errorf("parent of a child moved to %s is %s at once, want %s (its only step took the outcome)", to, parent.Status, to)
			}
			n.wantNoActiveTasks("parent of a child moved to "+string(to), inst.ID)
		}
	})
}

// A batch to a status that stops steps is one transaction with what the
// engine's write of each instance would carry: a paused child cancelled
// by a batch fails its parent's attempt (a retry starts a new child), and
// a running instance failed by a batch has its leased task cancelled, at
// once, with no sweep running.
func TestBatchStopCarriesTasksAndParents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{noSweeps: true})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf, retry: {max_attempts: 1}}\n")
		n.define("name: leafwork\nsteps:\n  - {id: work, type: task, handler: remote}\n")
		ctx := context.Background()
		inst := n.start("top", "bs-1", "")
		child := n.waitChild(inst.ID, "approve")
		if _, err := n.eng.Action(ctx, child.ID, "pause"); err != nil {
			t.Fatal(err)
		}
		ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusPaused, NewStatus: workflow.StatusCancelled,
			UpdatedBefore: time.Now().Add(time.Hour), Limit: 10})
		if err != nil || len(ids) != 1 || ids[0] != child.ID {
			t.Fatalf("batch cancel: %v, %v; want [%s]", ids, err, child.ID)
		}
		parent, err := n.st.Get(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if parent.Status != workflow.StatusFailed || parent.State.Steps["sub"].Status != workflow.StepFailed {
			t.Errorf("parent at once after its child's batch cancel: %s, step sub %s; want FAILED, FAILED", parent.Status, parent.State.Steps["sub"].Status)
		}
		n.wantNoActiveTasks("parent of a child cancelled by a batch", inst.ID)

		work := n.start("leafwork", "bs-2", "")
		n.poll() // its task, leased by a worker
		ids, err = n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusRunning, NewStatus: workflow.StatusFailed,
			UpdatedBefore: time.Now().Add(time.Hour), IDs: []string{work.ID}, Limit: 10})
		if err != nil || len(ids) != 1 {
			t.Fatalf("batch fail: %v, %v", ids, err)
		}
		n.wantNoActiveTasks("instance failed by a batch", work.ID)
	})
}
