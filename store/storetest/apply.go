package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Apply: one decided change written atomically, guarded by the instance's
// version and each task's guard; a miss writes nothing and says what moved.

var applyTests = []conformanceTest{
	{"Apply_ok", testApplyOK},
	{"Apply_settled", testApplySettled},
	{"Apply_stopsSteps", testApplyStopsSteps},
	{"Apply_staleVersion", testApplyStaleVersion},
	{"Apply_taskGuardMiss", testApplyTaskGuardMiss},
	{"Apply_invalid", testApplyInvalid},
	{"Apply_concurrent", testApplyConcurrent},
	{"Apply_taskOutputs", testApplyTaskOutputs},
	{"Apply_guardOnly", testApplyGuardOnly},
}

// applyFixture creates a RUNNING instance id (stepState: step a RUNNING),
// a task for a leased until an hour from now, and a QUEUED task for w
// (attempt 0). It returns the instance as stored and both tasks.
func (b *bundle) applyFixture(t testing.TB, id string) (*workflow.Instance, *store.Task, *store.Task) {
	t.Helper()
	eq := b.engine(t)
	inst, leased := b.leasedFixture(t, eq, id)
	queued := withID(id+"-w", newTask(id, "w", "q1", clockStart))
	b.insertTasks(t, queued)
	return b.get(t, inst.ID), leased, b.lockTask(t, eq, queued.ID)
}

// applyCompletion is the write that completes step a of inst (its task
// DONE), schedules b (a new task) and cancels the queued task of w, each
// guarded by the row as read.
func applyCompletion(inst *workflow.Instance, leased, queued *store.Task, now time.Time) (*store.Write, *store.Task, *store.Task, *store.Task) {
	w, next := completion(inst, leased, now)
	cancelled := *queued
	cancelled.Status = store.TaskCancelled
	w.Update = append(w.Update, store.TaskWrite{Task: &cancelled, Guard: store.GuardOf(queued)})
	return w, w.Update[0].Task, &cancelled, next
}

func testApplyOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, queued := b.applyFixture(t, "w")
	now := b.clock.Advance(time.Second)
	deadline := store.Timestamp(now.Add(time.Hour))
	w, done, cancelled, next := applyCompletion(inst, leased, queued, now)
	w.Deadline = &deadline
	wantState := w.State.Clone()
	wantDone, wantCancelled := *done, *cancelled
	got, err := b.s.Apply(b.ctx, w)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := *inst
	want.Version, want.State, want.UpdatedAt, want.Deadline = inst.Version+1, wantState, store.Timestamp(now), &deadline
	assertInstance(t, "Apply's result", &want, got)
	assertInstance(t, "instance after Apply", &want, b.get(t, inst.ID))
	hist := b.history(t, inst.ID)
	if len(hist) != int(inst.Version)+2 {
		t.Fatalf("history has %d rows after Apply, want %d", len(hist), inst.Version+2)
	}
	last := hist[len(hist)-1]
	if last.Version != inst.Version+1 || last.Cause != "step a completed" || last.Status != workflow.StatusRunning {
		t.Errorf("last history row: version %d, status %s, cause %q; want %d, RUNNING, %q", last.Version, last.Status, last.Cause, inst.Version+1, "step a completed")
	}
	assertState(t, "history state of the write", wantState, last.State)
	checkTime(t, "history row time", last.At, now)

	wantDone.UpdatedAt, wantCancelled.UpdatedAt = store.Timestamp(now), store.Timestamp(now)
	assertTask(t, "the completed task", &wantDone, b.lockTask(t, eq, leased.ID))
	assertTask(t, "the cancelled task", &wantCancelled, b.lockTask(t, eq, queued.ID))
	assertTask(t, "the inserted task", stored(next, now), b.lockTask(t, eq, next.ID))
	assertTask(t, "the caller's inserted task", stored(next, now), next)
}

// A settled second version: the action's status, then the one the instance
// settles in, two history rows with their causes; the second version's
// state has its active steps cancelled (the settled status stops steps),
// the first's does not.
func testApplySettled(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.running(t, "w")
	inst = b.transition(t, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
	now := b.clock.Advance(time.Second)
	w := &store.Write{
		ID: inst.ID, ExpectedVersion: inst.Version, From: workflow.StatusPaused,
		Status: workflow.StatusRunning, State: inst.State.Clone(), Cause: "resume",
		Settled: workflow.StatusFailed, SettledCause: "FAILED after resume", Now: now,
	}
	got, err := b.s.Apply(b.ctx, w)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got.Version != inst.Version+2 || got.Status != workflow.StatusFailed {
		t.Errorf("Apply returned version %d, status %s; want %d, FAILED", got.Version, got.Status, inst.Version+2)
	}
	stopped := inst.State.Clone()
	stopped.CancelActiveSteps()
	assertState(t, "state returned", stopped, got.State)
	stored := b.get(t, inst.ID)
	if stored.Version != inst.Version+2 || stored.Status != workflow.StatusFailed {
		t.Errorf("stored version %d, status %s; want %d, FAILED", stored.Version, stored.Status, inst.Version+2)
	}
	assertState(t, "state stored", stopped, stored.State)
	hist := b.history(t, inst.ID)
	if len(hist) != int(inst.Version)+3 {
		t.Fatalf("history has %d rows, want %d", len(hist), inst.Version+3)
	}
	first, second := hist[len(hist)-2], hist[len(hist)-1]
	if first.Version != inst.Version+1 || first.Status != workflow.StatusRunning || first.Cause != "resume" {
		t.Errorf("first new history row: version %d, status %s, cause %q", first.Version, first.Status, first.Cause)
	}
	assertState(t, "first new version's state", inst.State, first.State)
	if second.Version != inst.Version+2 || second.Status != workflow.StatusFailed || second.Cause != "FAILED after resume" {
		t.Errorf("second new history row: version %d, status %s, cause %q", second.Version, second.Status, second.Cause)
	}
	assertState(t, "settled version's state", stopped, second.State)
}

// A status that stops steps cancels the active ones, as every status write
// does.
func testApplyStopsSteps(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.running(t, "w")
	w := &store.Write{
		ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
		Status: workflow.StatusCancelled, State: inst.State.Clone(), Cause: "cancel", Now: b.clock.Now(),
	}
	got, err := b.s.Apply(b.ctx, w)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := inst.State.Clone()
	want.CancelActiveSteps()
	assertState(t, "state of the cancelled instance", want, got.State)
	assertState(t, "stored state of the cancelled instance", want, b.get(t, inst.ID).State)
	if h := b.history(t, inst.ID); h[len(h)-1].Status != workflow.StatusCancelled {
		t.Errorf("last history row is %s, want CANCELLED", h[len(h)-1].Status)
	}
}

// applyUnchanged fails t unless the instance, its history and its tasks
// are as before a failed Apply, and the task it would insert is absent.
func (b *bundle) applyUnchanged(t testing.TB, what string, snap snapshot, tasks []*store.Task) {
	t.Helper()
	eq := b.engine(t)
	b.unchanged(t, what, snap)
	got := b.tasksOf(t, eq, snap.inst.ID)
	if len(got) != len(tasks) {
		t.Errorf("%s: instance has %d tasks, want %d", what, len(got), len(tasks))
	}
	for _, tk := range tasks {
		assertTask(t, what+": task "+tk.ID, tk, b.lockTask(t, eq, tk.ID))
	}
}

func testApplyStaleVersion(t *testing.T, h Harness) {
	b := setup(t, h)
	inst, leased, queued := b.applyFixture(t, "w")
	now := b.clock.Now()
	w, _, _, _ := applyCompletion(inst, leased, queued, now)
	w.ExpectedVersion = inst.Version + 1 // not yet written: as stale as an older one
	snap := b.snapshot(t, inst.ID)
	before := b.tasksOf(t, b.engine(t), inst.ID)
	_, err := b.s.Apply(b.ctx, w)
	wantConflict(t, "Apply at a stale version", err, inst.ID, inst.Version+1, inst.Version)
	b.applyUnchanged(t, "after a stale Apply", snap, before)
}

func testApplyTaskGuardMiss(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name   string
		change func(w *store.Write)
		taskID string // the task whose guard misses
	}{
		{"wrong lease", func(w *store.Write) { w.Update[0].Guard.Lease = "another lease" }, "w-a"},
		{"lease extended since read", func(w *store.Write) {
			w.Update[0].Guard.LeaseUntil = w.Update[0].Guard.LeaseUntil.Add(time.Minute)
		}, "w-a"},
		{"lease guard on a task that is not leased", func(w *store.Write) {
			w.Update[1].Guard = store.GuardOf(w.Update[0].Task)
			w.Update[1].Guard.Status, w.Update[1].Guard.Lease = store.TaskLeased, "lease-w-a"
			w.Update[1].Guard.LeaseUntil = clockStart.Add(time.Hour)
		}, "w-w"},
		{"wrong status", func(w *store.Write) { w.Update[1].Guard.Status = store.TaskDone }, "w-w"},
		{"wrong attempt", func(w *store.Write) { w.Update[1].Guard.Attempt = 1 }, "w-w"},
		{"only update misses", func(w *store.Write) {
			w.Update = w.Update[1:]
			w.Update[0].Guard.Attempt = 7
		}, "w-w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, h)
			inst, leased, queued := b.applyFixture(t, "w")
			w, _, _, _ := applyCompletion(inst, leased, queued, b.clock.Now())
			tc.change(w)
			snap := b.snapshot(t, inst.ID)
			before := b.tasksOf(t, b.engine(t), inst.ID)
			_, err := b.s.Apply(b.ctx, w)
			var tc2 *store.TaskConflictError
			if !errors.As(err, &tc2) {
				t.Fatalf("Apply = %v (%T), want a *store.TaskConflictError", err, err)
			}
			if tc2.TaskID != tc.taskID || tc2.InstanceID != inst.ID {
				t.Errorf("TaskConflictError names task %q of %q, want %q of %q", tc2.TaskID, tc2.InstanceID, tc.taskID, inst.ID)
			}
			wantErrorIs(t, "task guard miss", err, store.ErrConflict)
			b.applyUnchanged(t, "after a task guard miss", snap, before)
		})
	}
}

func testApplyInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	inst, leased, queued := b.applyFixture(t, "w")
	now := b.clock.Now()
	snap := b.snapshot(t, inst.ID)
	before := b.tasksOf(t, b.engine(t), inst.ID)
	for _, tc := range []struct {
		name   string
		change func(w *store.Write)
		want   error
	}{
		{"unguarded update", func(w *store.Write) { w.Update[1].Guard = store.TaskGuard{} }, store.ErrInvalidArgument},
		{"leased row without its lease", func(w *store.Write) { w.Update[0].Guard.Lease = "" }, store.ErrInvalidArgument},
		{"leased row without its lease's end", func(w *store.Write) { w.Update[0].Guard.LeaseUntil = time.Time{} }, store.ErrInvalidArgument},
		{"task of another instance", func(w *store.Write) { w.Update[1].Task.InstanceID = "other" }, store.ErrInvalidArgument},
		{"task inserted for another instance", func(w *store.Write) { w.Insert[0].InstanceID = "other" }, store.ErrInvalidArgument},
		{"task updated twice", func(w *store.Write) { w.Update[1] = w.Update[0] }, store.ErrInvalidArgument},
		{"transition not allowed", func(w *store.Write) { w.Status = workflow.StatusPending }, workflow.ErrInvalidTransition},
		{"terminal", func(w *store.Write) { w.From = workflow.StatusCompleted }, workflow.ErrTerminal},
		{"unknown instance", func(w *store.Write) {
			w.ID, w.Insert, w.Update = "nobody", nil, nil
		}, store.ErrNotFound},
		{"new task's step taken", func(w *store.Write) { w.Insert[0].StepID = "w" }, store.ErrExists},
	} {
		w, _, _, _ := applyCompletion(inst, leased, queued, now)
		tc.change(w)
		_, err := b.s.Apply(b.ctx, w)
		wantErrorIs(t, tc.name, err, tc.want)
		b.applyUnchanged(t, tc.name, snap, before)
	}
}

// Eight writers increment one counter through read → decide → Apply,
// reading again on every conflict: every increment lands exactly once,
// and the history has every version once, in order, each with the value
// its write decided.
func testApplyConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	const writers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				for {
					cur, err := b.s.Get(b.ctx, inst.ID)
					if err != nil {
						errs <- err
						return
					}
					if err := increment(&cur.State); err != nil {
						errs <- err
						return
					}
					_, err = b.s.Apply(b.ctx, &store.Write{
						ID: cur.ID, ExpectedVersion: cur.Version, From: cur.Status, Status: cur.Status,
						State: cur.State, Cause: "increment", Now: b.clock.Now(),
					})
					if errors.Is(err, store.ErrConflict) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	final := b.get(t, inst.ID)
	if n := counter(final.State); n != writers*each || final.Version != writers*each {
		t.Fatalf("counter %d at version %d, want %d at version %d", n, final.Version, writers*each, writers*each)
	}
	for i, e := range b.history(t, inst.ID) {
		if e.Version != int64(i) || counter(e.State) != i {
			t.Errorf("history row %d: version %d, counter %d", i, e.Version, counter(e.State))
		}
	}
}

// A task write stores the task's output (a foreach iteration's record),
// alone (one task) or among others; a later write that gives none keeps it.
func testApplyTaskOutputs(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	for _, alone := range []bool{true, false} {
		id := map[bool]string{true: "alone", false: "among"}[alone]
		inst, leased, queued := b.applyFixture(t, id)
		now := b.clock.Advance(time.Second)
		w, done, _, _ := applyCompletion(inst, leased, queued, now)
		if alone {
			w.Update = w.Update[:1]
		}
		done.Output = []byte(`{"n":1,"s":"é"}`)
		written, err := b.s.Apply(b.ctx, w)
		if err != nil {
			t.Fatalf("%s: Apply: %v", id, err)
		}
		stored := b.lockTask(t, eq, leased.ID)
		if got := string(stored.Output); got != `{"n":1,"s":"é"}` {
			t.Errorf("%s: the stored output %s", id, got)
		}
		if other := b.lockTask(t, eq, queued.ID); other.Output != nil {
			t.Errorf("%s: a task written without output has %s", id, other.Output)
		}
		again := *stored
		again.Output, again.LastError = nil, "noted"
		w2 := &store.Write{ID: id, ExpectedVersion: written.Version, From: written.Status, Status: written.Status,
			State: written.State, Cause: "again", Now: now,
			Update: []store.TaskWrite{{Task: &again, Guard: store.GuardOf(stored)}}}
		if _, err := b.s.Apply(b.ctx, w2); err != nil {
			t.Fatalf("%s: second Apply: %v", id, err)
		}
		if got := b.lockTask(t, eq, leased.ID); string(got.Output) != `{"n":1,"s":"é"}` || got.LastError != "noted" {
			t.Errorf("%s: after a write without output: output %s, last error %q", id, got.Output, got.LastError)
		}
	}
}

// A guard-only update (a run's lease guarding its checkpoint) writes the
// version while the row is as its guard says, and leaves the row as it
// was, its updated_at included; a guard that misses writes nothing; and a
// guard-only update that changes the row, or shares its write with
// another update, is refused.
func testApplyGuardOnly(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, queued := b.applyFixture(t, "w")
	b.clock.Advance(time.Second)
	// checkpoint guards on row, as read by its caller.
	checkpoint := func(row store.Task) *store.Write {
		state := inst.State.Clone()
		state.Steps["c"] = &workflow.StepState{Status: workflow.StepCompleted, Output: json.RawMessage(`1`), Attempts: 1}
		return &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status, State: state,
			Deadline: inst.Deadline, Cause: `step "c" completed`, Now: b.clock.Now(),
			Update: []store.TaskWrite{{Task: &row, Guard: store.GuardOf(&row), GuardOnly: true}}}
	}

	// Read under another lease than the stored one: it moved since.
	moved := *leased
	moved.Lease = "another lease"
	snap := b.snapshot(t, inst.ID)
	before := b.tasksOf(t, eq, inst.ID)
	_, err := b.s.Apply(b.ctx, checkpoint(moved))
	var tc *store.TaskConflictError
	if !errors.As(err, &tc) || tc.TaskID != leased.ID {
		t.Fatalf("guard-only Apply with a guard that misses = %v (%T), want a *store.TaskConflictError naming %s", err, err, leased.ID)
	}
	b.applyUnchanged(t, "after a guard-only miss", snap, before)

	changed := checkpoint(*leased)
	changed.Update[0].Task.Status = store.TaskDone
	_, err = b.s.Apply(b.ctx, changed)
	wantErrorIs(t, "guard-only update that changes the row", err, store.ErrInvalidArgument)
	two := checkpoint(*leased)
	two.Update = append(two.Update, store.TaskWrite{Task: queued, Guard: store.GuardOf(queued)})
	_, err = b.s.Apply(b.ctx, two)
	wantErrorIs(t, "guard-only update beside another", err, store.ErrInvalidArgument)
	b.applyUnchanged(t, "after refused guard-only writes", snap, before)

	w := checkpoint(*leased)
	got, err := b.s.Apply(b.ctx, w)
	if err != nil {
		t.Fatalf("guard-only Apply: %v", err)
	}
	if got.Version != inst.Version+1 || got.State.Steps["c"] == nil {
		t.Errorf("guard-only Apply wrote version %d with steps %v, want %d with c", got.Version, got.State.Steps, inst.Version+1)
	}
	assertTask(t, "the guarded row", leased, b.lockTask(t, eq, leased.ID))
	if row := b.lockTask(t, eq, leased.ID); !row.UpdatedAt.Equal(leased.UpdatedAt) {
		t.Errorf("the guarded row's updated_at moved from %s to %s", leased.UpdatedAt, row.UpdatedAt)
	}
	assertTask(t, "the write's task", leased, w.Update[0].Task)
}
