package rules

import (
	"slices"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Only a RUNNING instance's tasks are delivered, and a PAUSED instance's
// sleep timers: every other status holds every task (the ticks and
// timers of Serverless Workflow instances included).
func TestHeld(t *testing.T) {
	for _, status := range []workflow.Status{workflow.StatusPending, workflow.StatusQueued, workflow.StatusRunning, workflow.StatusPaused,
		workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled, workflow.StatusTimedOut} {
		for _, queue := range []string{"q", store.QueueSleep, store.QueueTick, store.QueueHTTP} {
			want := status != workflow.StatusRunning && !(status == workflow.StatusPaused && queue == store.QueueSleep)
			if got := Held(status, queue); got != want {
				t.Errorf("Held(%s, %s) = %v, want %v", status, queue, got, want)
			}
		}
	}
}

// rows returns copies of the world's task rows, in key order: what the
// engine reads for a write.
func (w *world) rows() []store.Task {
	keys := make([]string, 0, len(w.tasks))
	for k := range w.tasks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rows := make([]store.Task, len(keys))
	for i, k := range keys {
		rows[i] = *w.tasks[k]
	}
	return rows
}

// actHeld performs action as the engine writes it: decided on copies of
// the rows, held as the status it leaves says (Change.Hold).
func (w *world) actHeld(action string) Change {
	w.t.Helper()
	from := w.inst.Status
	existing := map[string]*store.Task{}
	for k, row := range w.tasks {
		v := *row
		existing[k] = &v
	}
	ch, err := w.env.Act(w.c, w.inst, action, existing, w.now)
	if err != nil {
		w.t.Fatalf("%s: %v", action, err)
	}
	ch.StopTasks(from, w.rows())
	ch.Hold(from, w.rows())
	w.apply(ch)
	return ch
}

// wantHeld fails unless each step's task has the held flag given.
func (w *world) wantHeld(what string, want map[string]bool) {
	w.t.Helper()
	for step, held := range want {
		if got := w.tasks[step].Held; got != held {
			w.t.Errorf("%s: %s's task held %v, want %v", what, step, got, held)
		}
	}
}

const holdDef = `
name: hold
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h}
  - {id: nap, type: sleep, duration: 1h}
  - {id: c, type: task, handler: h, depends_on: [b]}
`

// A pause holds the queued and the leased tasks (a leased one may be
// queued again by a write of its row alone, which keeps the flag) but not
// the sleep timer; a resume releases them, each in the write of the
// status. Deciding again on the same rows adds nothing.
func TestPauseHoldsAndResumeReleases(t *testing.T) {
	w := started(t, holdDef, `{}`)
	w.wantHeld("started", map[string]bool{"a": false, "b": false, "nap": false})
	w.deliver("b")

	ch := w.actHeld("pause")
	if len(ch.Update) != 2 {
		t.Errorf("pause writes %d task rows, want 2 (a queued, b leased): %+v", len(ch.Update), ch.Update)
	}
	for _, u := range ch.Update {
		if u.Guard != (store.TaskGuard{}) {
			t.Errorf("the pause's update of %s has a guard of its own %+v: the caller guards it with the row it read", u.Task.StepID, u.Guard)
		}
	}
	w.wantHeld("paused", map[string]bool{"a": true, "b": true, "nap": false})
	again := Change{Status: workflow.StatusPaused, State: w.inst.State}
	again.Hold(workflow.StatusRunning, w.rows())
	if len(again.Update) != 0 {
		t.Errorf("holding the held rows again writes %+v, want nothing", again.Update)
	}

	// b's attempt completes while paused: its row is written held (the
	// instance's status), and c, which waits for b, is not scheduled.
	b := w.tasks["b"]
	ch, err := w.env.CompleteTask(w.c, w.inst, b, b.Lease, []byte(`1`), NextLease{}, w.now)
	if err != nil {
		t.Fatal(err)
	}
	ch.Hold(workflow.StatusPaused, w.rows())
	if len(ch.Update) != 1 || len(ch.Insert) != 0 {
		t.Errorf("b's completion while paused writes %+v and inserts %+v, want b's row alone", ch.Update, ch.Insert)
	}
	w.apply(ch)
	w.wantHeld("b completed while paused", map[string]bool{"b": true})
	if w.step("c").Status != workflow.StepPending {
		t.Errorf("c is %s while paused, want PENDING", w.step("c").Status)
	}

	ch = w.actHeld("resume")
	w.wantStatus(workflow.StatusRunning)
	w.wantHeld("resumed", map[string]bool{"a": false, "nap": false})
	for _, u := range ch.Update {
		if u.Task.StepID == "b" {
			t.Errorf("the resume writes b's finished row: %+v", u.Task)
		}
	}
	if !ch.Notify {
		t.Error("a resume that releases tasks does not wake the workers")
	}
}

// The write that fails the instance cancels its tasks and holds them; the
// retry queues the failed step's row again, released.
func TestRetryReleasesTheRequeuedRow(t *testing.T) {
	w := started(t, "name: r\nsteps:\n  - {id: a, type: task, handler: h, retry: {max_attempts: 1}}\n", `{}`)
	a := w.deliver("a")
	ch, err := w.env.FailTask(w.c, w.inst, a, a.Lease, "boom", false, w.now)
	if err != nil {
		t.Fatal(err)
	}
	ch.StopTasks(workflow.StatusRunning, w.rows())
	ch.Hold(workflow.StatusRunning, w.rows())
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	w.wantHeld("failed", map[string]bool{"a": true})

	w.actHeld("retry")
	w.wantStatus(workflow.StatusRunning)
	if a := w.tasks["a"]; a.Status != store.TaskQueued || a.Held {
		t.Errorf("retried: a's row %s, held %v; want QUEUED, not held", a.Status, a.Held)
	}
}

// Hold leaves a change that writes no version alone (a claim of
// iterations), and rows of a status change that stops the instance to
// StopTasks.
func TestHoldLeavesLeasesAndStops(t *testing.T) {
	rows := []store.Task{{ID: "q", Queue: "h", Status: store.TaskQueued}, {ID: "l", Queue: "h", Status: store.TaskLeased, Held: true}}
	leases := Change{LeasesOnly: true, Update: []TaskUpdate{{Task: store.Task{ID: "l", Status: store.TaskLeased, Held: true}}}}
	leases.Hold(workflow.StatusPaused, rows)
	if len(leases.Update) != 1 || !leases.Update[0].Task.Held {
		t.Errorf("a leases-only change: %+v", leases.Update)
	}
	stop := Change{Status: workflow.StatusCancelled}
	if stop.HoldsChange(workflow.StatusPaused) {
		t.Error("a cancel changes the flag of rows it does not write")
	}
	stop.Hold(workflow.StatusPaused, rows)
	if len(stop.Update) != 0 {
		t.Errorf("a cancel's Hold adds %+v", stop.Update)
	}
	settled := Change{Status: workflow.StatusRunning, Settled: workflow.StatusCompleted}
	if settled.HoldsChange(workflow.StatusPaused) {
		t.Error("a resume that settles COMPLETED changes the flag of rows it does not write")
	}
	start := Change{Status: workflow.StatusRunning, Insert: []store.Task{{ID: "n", Queue: "h"}}}
	start.Hold(workflow.StatusQueued, nil)
	if start.Insert[0].Held {
		t.Error("a started instance's first task is held")
	}
}

// A change of the status alone (a batch, a transition that is no action)
// holds and releases the rows as a pause and a resume do.
func TestSetStatusHoldsAndReleases(t *testing.T) {
	rows := []store.Task{
		{ID: "q", Queue: "h", Status: store.TaskQueued},
		{ID: "sleep", Queue: store.QueueSleep, Status: store.TaskQueued},
		{ID: "done", Queue: "h", Status: store.TaskDone},
	}
	inst := &workflow.Instance{Status: workflow.StatusRunning}
	ch := SetStatus(inst, workflow.StatusPaused, rows)
	if len(ch.Update) != 1 || ch.Update[0].Task.ID != "q" || !ch.Update[0].Task.Held {
		t.Fatalf("RUNNING → PAUSED writes %+v, want q held", ch.Update)
	}
	rows[0].Held = true
	inst.Status = workflow.StatusPaused
	ch = SetStatus(inst, workflow.StatusRunning, rows)
	if len(ch.Update) != 1 || ch.Update[0].Task.ID != "q" || ch.Update[0].Task.Held {
		t.Fatalf("PAUSED → RUNNING writes %+v, want q released", ch.Update)
	}
}
