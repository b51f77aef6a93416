package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// parallelDef runs a and b at once beside the wait step w; c waits for a.
const parallelDef = `
name: par
steps:
  - {id: a, type: task, handler: remote, retry: {max_attempts: 1}}
  - {id: b, type: task, handler: remote, retry: {max_attempts: 2}}
  - {id: w, type: wait}
  - {id: c, type: task, handler: remote, depends_on: [a]}
`

// wantSteps checks the step statuses of inst.
func wantSteps(t *testing.T, what string, inst *workflow.Instance, want map[string]workflow.StepStatus) {
	t.Helper()
	for id, st := range want {
		if got := inst.State.Steps[id].Status; got != st {
			t.Errorf("%s: step %s is %s, want %s", what, id, got, st)
		}
	}
}

// wantStoppedInHistory checks that the last history row is the status change
// itself, already with the cancelled steps, and the one before it still
// shows them active: the same version and the same row.
func (n *node) wantStoppedInHistory(inst *workflow.Instance, status workflow.Status, cancelled ...string) {
	n.t.Helper()
	h := n.checkHistory(inst)
	last, prev := h[len(h)-1], h[len(h)-2]
	if last.Status != status {
		n.t.Errorf("last history row is %s, want %s", last.Status, status)
	}
	for _, id := range cancelled {
		if got := last.State.Steps[id].Status; got != workflow.StepCancelled {
			n.t.Errorf("history row %d (%s): step %s is %s, want CANCELLED", last.Version, last.Status, id, got)
		}
		if got := prev.State.Steps[id].Status; !got.Active() {
			n.t.Errorf("history row %d (%s): step %s is %s, want it still active", prev.Version, prev.Status, id, got)
		}
	}
}

// poll leases one task of handler remote.
func (n *node) poll() *engine.Task {
	n.t.Helper()
	task, err := n.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Wait: 5 * time.Second})
	if err != nil || task == nil {
		n.t.Fatalf("poll: %+v, %v", task, err)
	}
	return task
}

// A step that exhausts its attempts fails the instance and cancels its other
// running and waiting steps in that write; retry runs them again, with a
// fresh budget, and leaves PENDING steps PENDING.
func TestFailureCancelsOtherStepsAndRetryRestoresThem(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(parallelDef)
		ctx := context.Background()
		inst := n.start("par", "f-1", "")
		wantSteps(t, "started", inst, map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepRunning, "w": workflow.StepWaiting, "c": workflow.StepPending})
		leased := map[string]*engine.Task{}
		for range 2 {
			task := n.poll()
			leased[task.Step] = task
		}
		if err := n.eng.FailTask(ctx, leased["a"].ID, leased["a"].Lease, "card declined", false); err != nil {
			t.Fatal(err)
		}
		failed, err := n.st.Get(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if failed.Status != workflow.StatusFailed {
			t.Fatalf("instance is %s, want FAILED", failed.Status)
		}
		wantSteps(t, "after a failed", failed, map[string]workflow.StepStatus{"a": workflow.StepFailed, "b": workflow.StepCancelled, "w": workflow.StepCancelled, "c": workflow.StepPending})
		n.wantStoppedInHistory(failed, workflow.StatusFailed, "b", "w")
		// b's worker finds out that its task no longer counts.
		if err := n.eng.CompleteTask(ctx, leased["b"].ID, leased["b"].Lease, json.RawMessage(`1`)); err == nil {
			t.Error("completing a cancelled step's task succeeded")
		}

		retried, err := n.eng.Action(ctx, inst.ID, "retry")
		if err != nil {
			t.Fatal(err)
		}
		wantSteps(t, "after retry", retried, map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepRunning, "w": workflow.StepWaiting, "c": workflow.StepPending})
		again := map[string]*engine.Task{}
		for range 2 {
			task := n.poll()
			again[task.Step] = task
		}
		if again["a"] == nil || again["b"] == nil {
			t.Fatalf("retry re-queued %v, want a and b", again)
		}
		// A fresh budget: b had used 1 of 2 attempts; a failure now is retried.
		if err := n.eng.FailTask(ctx, again["b"].ID, again["b"].Lease, "flaky", true); err != nil {
			t.Fatal(err)
		}
		cur, _ := n.st.Get(ctx, inst.ID)
		if cur.Status != workflow.StatusRunning || cur.State.Steps["b"].Status != workflow.StepRunning {
			t.Errorf("b's first failure after retry: instance %s, b %s; want a retry with a fresh budget", cur.Status, cur.State.Steps["b"].Status)
		}
		n.checkHistory(cur)
	})
}

// Every other way to stop an instance cancels its active steps too: the
// cancel action, /status transitions, batch status and the timeout sweeper;
// retry after a timeout restores them.
func TestStoppingPathsCancelActiveSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(parallelDef)
		ctx := context.Background()
		active := []string{"a", "b", "w"}
		check := func(what, id string, status workflow.Status) *workflow.Instance {
			t.Helper()
			inst, err := n.st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status != status {
				t.Fatalf("%s: instance is %s, want %s", what, inst.Status, status)
			}
			wantSteps(t, what, inst, map[string]workflow.StepStatus{"a": workflow.StepCancelled, "b": workflow.StepCancelled, "w": workflow.StepCancelled, "c": workflow.StepPending})
			n.wantStoppedInHistory(inst, status, active...)
			return inst
		}

		n.start("par", "cancel", "")
		if _, err := n.eng.Action(ctx, "cancel", "cancel"); err != nil {
			t.Fatal(err)
		}
		check("cancel action", "cancel", workflow.StatusCancelled)

		for _, tc := range []struct {
			id       string
			from, to workflow.Status
		}{
			{"st-cancel", workflow.StatusRunning, workflow.StatusCancelled},
			{"st-failed", workflow.StatusRunning, workflow.StatusFailed},
			{"st-timed-out", workflow.StatusRunning, workflow.StatusTimedOut},
			{"st-paused-cancel", workflow.StatusPaused, workflow.StatusCancelled},
			{"st-paused-timed-out", workflow.StatusPaused, workflow.StatusTimedOut},
		} {
			n.start("par", tc.id, "")
			if tc.from == workflow.StatusPaused {
				if _, err := n.eng.Action(ctx, tc.id, "pause"); err != nil {
					t.Fatal(err)
				}
			}
			out, err := n.eng.Transition(ctx, tc.id, tc.from, tc.to)
			if err != nil {
				t.Fatalf("%s → %s: %v", tc.from, tc.to, err)
			}
			wantSteps(t, "the /status answer", out, map[string]workflow.StepStatus{"a": workflow.StepCancelled, "w": workflow.StepCancelled})
			check(string(tc.from)+" → "+string(tc.to), tc.id, tc.to)
		}

		// Every instance above is stopped: the batch moves these two only.
		n.start("par", "batch-1", "")
		n.start("par", "batch-2", "")
		ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: time.Now().Add(time.Hour),
			NewStatus: workflow.StatusCancelled, Limit: 10, Cause: "batch"})
		if err != nil || len(ids) != 2 {
			t.Fatalf("batch: %v, %v", ids, err)
		}
		check("batch RUNNING → CANCELLED", "batch-1", workflow.StatusCancelled)
		check("batch RUNNING → CANCELLED", "batch-2", workflow.StatusCancelled)

		n.define(`
name: par-to
timeout: 100ms
steps:
  - {id: a, type: task, handler: remote}
  - {id: b, type: task, handler: remote}
  - {id: w, type: wait}
  - {id: c, type: task, handler: remote, depends_on: [a]}
`)
		n.start("par-to", "timeout", "")
		n.waitStatus("timeout", workflow.StatusTimedOut, 10*time.Second)
		check("the timeout sweeper", "timeout", workflow.StatusTimedOut)
		retried, err := n.eng.Action(ctx, "timeout", "retry")
		if err != nil {
			t.Fatal(err)
		}
		wantSteps(t, "retry after a timeout", retried, map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepRunning, "w": workflow.StepWaiting, "c": workflow.StepPending})
		n.checkHistory(retried)
	})
}
