package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// heldDef runs a remote worker's step and a short sleep side by side.
const heldDef = `
name: held
steps:
  - {id: a, type: task, handler: remote}
  - {id: nap, type: sleep, duration: 300ms}
`

// pollNow is one claim of a remote worker of "remote", without waiting.
func (n *node) pollNow() *engine.Task {
	n.t.Helper()
	task, err := n.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"remote"}})
	if err != nil {
		n.t.Fatal(err)
	}
	return task
}

// heldOf returns the held flag of instance id's task of step as stored.
func (n *node) heldOf(id, step string) bool {
	n.t.Helper()
	tasks, err := n.st.TasksOfInstance(context.Background(), id)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.StepID == step {
			return tk.Held
		}
	}
	n.t.Fatalf("workflow %s has no task of step %s", id, step)
	return false
}

// TestPausedTasksAreHeld: a PAUSED instance's queued task is not claimed,
// while its sleep timer runs out and completes the sleep; once it runs
// again (resume, a transition, a batch, a PATCH of its status) the task is
// claimed. Every way in and out of PAUSED writes the flag.
func TestPausedTasksAreHeld(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(heldDef)
		pauses := []struct {
			name  string
			pause func(id string) error
		}{
			{"action", func(id string) error { _, err := n.eng.Action(ctx, id, "pause"); return err }},
			{"transition", func(id string) error {
				_, err := n.eng.Transition(ctx, id, workflow.StatusRunning, workflow.StatusPaused)
				return err
			}},
			{"modify", func(id string) error {
				_, err := n.eng.ModifyState(ctx, id, func(inst *workflow.Instance) error { inst.Status = workflow.StatusPaused; return nil }, "patch")
				return err
			}},
			{"batch", func(id string) error {
				_, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{IDs: []string{id}, Status: workflow.StatusRunning,
					NewStatus: workflow.StatusPaused, UpdatedBefore: time.Now().Add(time.Hour), Limit: 1})
				return err
			}},
		}
		resumes := []struct {
			name   string
			resume func(id string) error
		}{
			{"action", func(id string) error { _, err := n.eng.Action(ctx, id, "resume"); return err }},
			{"transition", func(id string) error {
				_, err := n.eng.Transition(ctx, id, workflow.StatusPaused, workflow.StatusRunning)
				return err
			}},
			{"batch", func(id string) error {
				_, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{IDs: []string{id}, Status: workflow.StatusPaused,
					NewStatus: workflow.StatusRunning, UpdatedBefore: time.Now().Add(time.Hour), Limit: 1})
				return err
			}},
			{"modify", func(id string) error {
				_, err := n.eng.ModifyState(ctx, id, func(inst *workflow.Instance) error { inst.Status = workflow.StatusRunning; return nil }, "patch")
				return err
			}},
		}
		for i, p := range pauses {
			r := resumes[i]
			id := "held-" + p.name + "-" + r.name
			n.start("held", id, "")
			if err := p.pause(id); err != nil {
				t.Fatalf("%s: pause: %v", id, err)
			}
			if !n.heldOf(id, "a") || n.heldOf(id, "nap") {
				t.Errorf("%s: paused: a held %v, nap held %v; want true, false", id, n.heldOf(id, "a"), n.heldOf(id, "nap"))
			}
			if task := n.pollNow(); task != nil {
				t.Fatalf("%s: a PAUSED instance's task was claimed: %+v", id, task)
			}
			// The sleep's timer runs while paused.
			deadline := time.Now().Add(10 * time.Second)
			for {
				cur, err := n.st.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if cur.State.Steps["nap"].Status == workflow.StepCompleted {
					if cur.Status != workflow.StatusPaused {
						t.Fatalf("%s: %s after the sleep, want PAUSED", id, cur.Status)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the sleep did not complete while paused", id)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if task := n.pollNow(); task != nil {
				t.Fatalf("%s: a PAUSED instance's task was claimed after its sleep: %+v", id, task)
			}
			if err := r.resume(id); err != nil {
				t.Fatalf("%s: resume: %v", id, err)
			}
			if n.heldOf(id, "a") {
				t.Errorf("%s: resumed: a still held", id)
			}
			task := n.pollNow()
			if task == nil || task.WorkflowID != id || task.Step != "a" {
				t.Fatalf("%s: claim after the resume = %+v, want a's task", id, task)
			}
			if err := n.eng.CompleteTask(ctx, task.ID, task.Lease, []byte(`1`)); err != nil {
				t.Fatal(err)
			}
			n.checkHistory(n.waitStatus(id, workflow.StatusCompleted, 10*time.Second))
		}
	})
}

// TestRetriedTaskIsNotHeld: the write that fails an instance holds its
// task row with it (a stopped instance's tasks wait for nothing); the retry
// queues the row again released, and a worker claims it.
func TestRetriedTaskIsNotHeld(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define("name: once\nsteps:\n  - {id: a, type: task, handler: remote, retry: {max_attempts: 1}}\n")
		n.start("once", "r", "")
		task := n.pollNow()
		if task == nil {
			t.Fatal("nothing to claim")
		}
		if err := n.eng.FailTask(ctx, task.ID, task.Lease, "boom", false); err != nil {
			t.Fatal(err)
		}
		n.waitStatus("r", workflow.StatusFailed, 10*time.Second)
		if !n.heldOf("r", "a") {
			t.Error("the failed instance's task is not held")
		}
		if _, err := n.eng.Action(ctx, "r", "retry"); err != nil {
			t.Fatal(err)
		}
		if n.heldOf("r", "a") {
			t.Error("retried: a still held")
		}
		if task := n.pollNow(); task == nil || task.Step != "a" || task.Attempt != 2 {
			t.Fatalf("claim after the retry = %+v, want a's second attempt", task)
		}
	})
}
