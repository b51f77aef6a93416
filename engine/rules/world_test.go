package rules

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// world is one instance and its tasks kept in memory: what a store would
// hold. Each step of a test asks a rule for a change and applies it as the
// engine's write would.
type world struct {
	t     *testing.T
	env   Env
	c     *Definition
	inst  *workflow.Instance
	tasks map[string]*store.Task // by TaskKey: by step, and by step and iteration
	now   time.Time
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// testEnv makes ids id-1, id-2, … and a jitter of 0.5: decisions are
// deterministic.
func testEnv() Env {
	n := 0
	return Env{
		NewID:  func() string { n++; return fmt.Sprintf("id-%d", n) },
		Jitter: func() float64 { return 0.5 },
	}
}

func compileDef(t *testing.T, yaml string) *Definition {
	t.Helper()
	def, err := workflow.ParseDefinition([]byte(yaml))
	if err != nil {
		t.Fatalf("parsing the definition: %v", err)
	}
	c, err := Compile(def)
	if err != nil {
		t.Fatalf("compiling the definition: %v", err)
	}
	return c
}

// started returns a world whose instance of yaml has started with input.
func started(t *testing.T, yaml, input string) *world {
	t.Helper()
	w := &world{t: t, env: testEnv(), c: compileDef(t, yaml), tasks: map[string]*store.Task{}, now: t0}
	w.inst = &workflow.Instance{ID: "wf-1", Definition: w.c.Def.Name, Input: json.RawMessage(input), State: w.c.Def.InitialState()}
	ch, err := w.env.Start(w.c, w.inst, w.now)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if ch.Cause != "start" || ch.Status != workflow.StatusRunning {
		t.Fatalf("start: cause %q, status %s", ch.Cause, ch.Status)
	}
	w.apply(ch)
	w.inst.Version = 0
	return w
}

// apply writes ch as the store would: the instance's new version (and the
// settled one), the inserted and updated tasks, each update only while its
// guard is the row as stored (a zero guard is the caller's, made of the
// rows it read: the world's rows).
func (w *world) apply(ch Change) {
	if !ch.LeasesOnly {
		w.inst.Status, w.inst.State, w.inst.Deadline = ch.Status, ch.State, ch.Deadline
		w.inst.Version++
	}
	if ch.Settled != "" {
		w.inst.Status = ch.Settled
		w.inst.Version++
	}
	for _, t := range ch.Insert {
		key := TaskKey(t.StepID, t.Iteration)
		if w.tasks[key] != nil {
			w.t.Fatalf("a second task inserted for %s", key)
		}
		w.tasks[key] = &t
	}
	for _, u := range ch.Update {
		key := TaskKey(u.Task.StepID, u.Task.Iteration)
		if w.tasks[key] == nil {
			w.t.Fatalf("update of a task never inserted: %+v", u.Task)
		}
		if u.Guard != (store.TaskGuard{}) && u.Guard != store.GuardOf(w.tasks[key]) {
			w.t.Fatalf("the guard of %s's update, %+v, is not the row as stored, %+v", key, u.Guard, *w.tasks[key])
		}
		t := u.Task
		if t.Output == nil {
			t.Output = w.tasks[key].Output // a write without an output keeps the stored one
		}
		w.tasks[key] = &t
	}
}

// deliver leases step's task to "worker" as a claim would: a QUEUED task
// that its instance's status does not hold (Held, the flag the engine
// stores on the row) gets its next attempt's lease, and nothing else
// changes.
func (w *world) deliver(step string) *store.Task {
	w.t.Helper()
	task := w.tasks[step]
	if task == nil || task.Status != store.TaskQueued || Held(w.inst.Status, task.Queue) {
		w.t.Fatalf("step %s has no claimable task: %+v", step, task)
	}
	task.Deliver("worker", w.env.NewID(), w.now, 30*time.Second)
	return task
}

// complete completes step's leased task with output.
func (w *world) complete(step, output string) Change {
	w.t.Helper()
	task := w.tasks[step]
	ch, err := w.env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage(output), NextLease{}, w.now)
	if err != nil {
		w.t.Fatalf("completing %s: %v", step, err)
	}
	w.apply(ch)
	return ch
}

// fail fails step's leased attempt.
func (w *world) fail(step, msg string, retryable bool) Change {
	w.t.Helper()
	task := w.tasks[step]
	ch, err := w.env.FailTask(w.c, w.inst, task, task.Lease, msg, retryable, w.now)
	if err != nil {
		w.t.Fatalf("failing %s: %v", step, err)
	}
	w.apply(ch)
	return ch
}

// act performs action with the tasks as existing rows.
func (w *world) act(action string) (Change, error) {
	w.t.Helper()
	saved := w.inst.State.Clone()
	status, deadline := w.inst.Status, w.inst.Deadline
	ch, err := w.env.Act(w.c, w.inst, action, w.tasks, w.now)
	if err != nil {
		// A refused decision is thrown away with its working copy.
		w.inst.State, w.inst.Status, w.inst.Deadline = saved, status, deadline
		return ch, err
	}
	w.apply(ch)
	return ch, nil
}

func (w *world) step(id string) *workflow.StepState { return w.inst.State.Steps[id] }

func (w *world) wantSteps(want map[string]workflow.StepStatus) {
	w.t.Helper()
	for id, st := range want {
		if got := w.step(id).Status; got != st {
			w.t.Errorf("step %s is %s, want %s", id, got, st)
		}
	}
}

func (w *world) wantStatus(want workflow.Status) {
	w.t.Helper()
	if w.inst.Status != want {
		w.t.Fatalf("instance is %s, want %s", w.inst.Status, want)
	}
}
