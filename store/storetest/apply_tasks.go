package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Apply with TasksOnly: task rows written alone, each while its guard
// holds, without a version or a history row of their instance.

var applyTasksTests = []conformanceTest{
	{"ApplyTasks_ok", testApplyTasksOK},
	{"ApplyTasks_guardMiss", testApplyTasksGuardMiss},
	{"ApplyTasks_statusGuard", testApplyTasksStatusGuard},
	{"ApplyTasks_rowAsRead", testApplyTasksRowAsRead},
	{"ApplyTasks_invalid", testApplyTasksInvalid},
}

// tasksOnly is a TasksOnly write of inst's tasks at now.
func tasksOnly(inst string, now time.Time, updates ...store.TaskWrite) *store.Write {
	return &store.Write{ID: inst, TasksOnly: true, Now: now, Update: updates, Notify: true}
}

func testApplyTasksOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, queued := b.applyFixture(t, "w")
	snap := b.snapshot(t, inst.ID)
	now := b.clock.Advance(time.Second)
	extended := *leased
	extended.LeaseUntil = leased.LeaseUntil.Add(time.Hour)
	cancelled := *queued
	cancelled.Status = store.TaskCancelled
	got, err := b.s.Apply(b.ctx, tasksOnly(inst.ID, now,
		store.TaskWrite{Task: &extended, Guard: store.GuardOf(leased)},
		store.TaskWrite{Task: &cancelled, Guard: store.GuardOf(queued)}))
	if err != nil || got != nil {
		t.Fatalf("tasks-only Apply = %v, %v; want nil, nil", got, err)
	}
	// The caller's rows are as stored; the instance has no new version.
	checkTime(t, "UpdatedAt of the written task", extended.UpdatedAt, now)
	assertTask(t, "task a after the write", &extended, b.lockTask(t, eq, leased.ID))
	assertTask(t, "task w after the write", &cancelled, b.lockTask(t, eq, queued.ID))
	b.unchanged(t, "instance after a tasks-only write", snap)
}

func testApplyTasksGuardMiss(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, queued := b.applyFixture(t, "w")
	snap := b.snapshot(t, inst.ID)
	now := b.clock.Now()
	stale := *leased
	stale.Lease = "not-the-lease"
	cancelled := *queued
	cancelled.Status = store.TaskCancelled
	staleAttempt := store.GuardOf(queued)
	staleAttempt.Attempt++
	heartbeatSince := store.GuardOf(leased)
	heartbeatSince.LeaseUntil = leased.LeaseUntil.Add(-time.Second)
	for _, c := range []struct {
		what string
		w    *store.Write
		miss string
	}{
		{"a stale lease (with a write that holds)", tasksOnly(inst.ID, now,
			store.TaskWrite{Task: &cancelled, Guard: store.GuardOf(queued)},
			store.TaskWrite{Task: leased, Guard: store.GuardOf(&stale)}), leased.ID},
		{"a lease end that is not the row's", tasksOnly(inst.ID, now,
			store.TaskWrite{Task: leased, Guard: heartbeatSince}), leased.ID},
		{"a stale attempt", tasksOnly(inst.ID, now,
			store.TaskWrite{Task: &cancelled, Guard: staleAttempt}), queued.ID},
		{"a task of another instance's id", tasksOnly(inst.ID, now,
			store.TaskWrite{Task: &store.Task{ID: "nope", InstanceID: inst.ID, StepID: "x", Queue: "q1", MaxAttempts: 1, Status: store.TaskDone},
				Guard: store.TaskGuard{Status: store.TaskQueued}}), "nope"},
	} {
		_, err := b.s.Apply(b.ctx, c.w)
		var miss *store.TaskConflictError
		if !errors.As(err, &miss) || !errors.Is(err, store.ErrConflict) || miss.TaskID != c.miss || miss.InstanceID != inst.ID {
			t.Errorf("tasks-only Apply with %s = %v (%T), want a *TaskConflictError naming task %q", c.what, err, err, c.miss)
		}
	}
	assertTask(t, "task a after the misses", leased, b.lockTask(t, eq, leased.ID))
	assertTask(t, "task w after the misses", queued, b.lockTask(t, eq, queued.ID))
	b.unchanged(t, "instance after the misses", snap)
}

// testApplyTasksStatusGuard: From makes the write require the instance's
// status (no version): another status is a *ConflictError, an unknown
// instance ErrNotFound, and nothing is written.
func testApplyTasksStatusGuard(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, _, queued := b.applyFixture(t, "w")
	cancelled := *queued
	cancelled.Status = store.TaskCancelled
	w := tasksOnly(inst.ID, b.clock.Now(), store.TaskWrite{Task: &cancelled, Guard: store.GuardOf(queued)})
	w.From = workflow.StatusPaused
	_, err := b.s.Apply(b.ctx, w)
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("tasks-only Apply guarded by PAUSED on a RUNNING instance = %v (%T), want a *ConflictError", err, err)
	}
	assertTask(t, "task w after the status miss", queued, b.lockTask(t, eq, queued.ID))
	missing := *w
	missing.ID, missing.From = "nope", ""
	missing.Update = []store.TaskWrite{{Task: &store.Task{ID: "x", InstanceID: "nope", StepID: "x", Queue: "q1", MaxAttempts: 1, Status: store.TaskDone},
		Guard: store.TaskGuard{Status: store.TaskQueued}}}
	_, err = b.s.Apply(b.ctx, &missing)
	wantErrorIs(t, "tasks-only Apply of an unknown instance", err, store.ErrNotFound)

	// A version of the instance in between does not matter; its status does.
	b.transition(t, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
	snap := b.snapshot(t, inst.ID)
	if _, err := b.s.Apply(b.ctx, w); err != nil {
		t.Fatalf("tasks-only Apply guarded by PAUSED on a PAUSED instance: %v", err)
	}
	assertTask(t, "task w after the write", &cancelled, b.lockTask(t, eq, queued.ID))
	b.unchanged(t, "instance after a tasks-only write", snap)
}

// testApplyTasksRowAsRead: a task write holds only while the stored row is
// the one its writer read, whatever moved it since: a heartbeat between
// the read and the write makes an expiry miss, a second delivery makes the
// first lease's completion miss, a completion makes a cancel miss. The
// store decides nothing about the lease's clock: an expiry guarded by the
// row as stored holds, in a versioned Apply too.
func testApplyTasksRowAsRead(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, _ := b.applyFixture(t, "w")
	now := b.clock.Now()
	apply := func(what string, w *store.Write, miss bool) {
		t.Helper()
		_, err := b.s.Apply(b.ctx, w)
		var tc *store.TaskConflictError
		switch {
		case miss && (!errors.As(err, &tc) || tc.TaskID != leased.ID):
			t.Fatalf("%s = %v (%T), want a *TaskConflictError naming task %q", what, err, err, leased.ID)
		case !miss && err != nil:
			t.Fatalf("%s: %v", what, err)
		}
	}
	// A heartbeat, then an expiry decided on the row read before it.
	extended := *leased
	extended.LeaseUntil = leased.LeaseUntil.Add(time.Hour)
	apply("a heartbeat", tasksOnly(inst.ID, now, store.TaskWrite{Task: &extended, Guard: store.GuardOf(leased)}), false)
	requeued := *leased
	requeued.Status, requeued.Lease, requeued.LeaseOwner, requeued.LeaseUntil = store.TaskQueued, "", "", time.Time{}
	apply("an expiry read before a heartbeat", tasksOnly(inst.ID, now, store.TaskWrite{Task: &requeued, Guard: store.GuardOf(leased)}), true)
	assertTask(t, "the task after the expiry that missed", &extended, b.lockTask(t, eq, leased.ID))

	// An expiry decided on the row as the heartbeat left it, in a version.
	cur := b.get(t, inst.ID)
	got, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: cur.Version, From: cur.Status, Status: cur.Status,
		State: cur.State, Cause: "lease expired", Now: now, Update: []store.TaskWrite{{Task: &requeued, Guard: store.GuardOf(&extended)}}})
	if err != nil || got.Version != cur.Version+1 {
		t.Fatalf("an expiry guarded by the row as stored = %v, %v; want version %d", got, err, cur.Version+1)
	}
	assertTask(t, "the expired task", &requeued, b.lockTask(t, eq, leased.ID))

	// A second delivery; the first lease's completion misses.
	second := requeued
	second.Status, second.Attempt, second.Lease, second.LeaseOwner = store.TaskLeased, leased.Attempt+1, "second-lease", "w2"
	second.LeaseUntil = now.Add(time.Hour)
	apply("a second delivery", tasksOnly(inst.ID, now, store.TaskWrite{Task: &second, Guard: store.GuardOf(&requeued)}), false)
	done := *leased
	done.Status, done.Lease, done.LeaseOwner, done.LeaseUntil = store.TaskDone, "", "", time.Time{}
	apply("the first lease's completion", tasksOnly(inst.ID, now, store.TaskWrite{Task: &done, Guard: store.GuardOf(&extended)}), true)
	assertTask(t, "the task after the stale completion", &second, b.lockTask(t, eq, leased.ID))

	// The second lease's completion; a cancel decided before it misses.
	done.Attempt = second.Attempt
	apply("the second lease's completion", tasksOnly(inst.ID, now, store.TaskWrite{Task: &done, Guard: store.GuardOf(&second)}), false)
	cancelled := second
	cancelled.Status, cancelled.Lease, cancelled.LeaseOwner, cancelled.LeaseUntil = store.TaskCancelled, "", "", time.Time{}
	apply("a cancel read before the completion", tasksOnly(inst.ID, now, store.TaskWrite{Task: &cancelled, Guard: store.GuardOf(&second)}), true)
	assertTask(t, "the completed task", &done, b.lockTask(t, eq, leased.ID))
}

func testApplyTasksInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, queued := b.applyFixture(t, "w")
	snap := b.snapshot(t, inst.ID)
	now := b.clock.Now()
	ok := func() *store.Write {
		c := *queued
		c.Status = store.TaskCancelled
		return tasksOnly(inst.ID, now, store.TaskWrite{Task: &c, Guard: store.GuardOf(queued)})
	}
	for what, change := range map[string]func(w *store.Write){
		"an insert":           func(w *store.Write) { w.Insert = []*store.Task{newTask(inst.ID, "new", "q1", now)} },
		"a status":            func(w *store.Write) { w.Status = workflow.StatusRunning },
		"a state":             func(w *store.Write) { w.State = inst.State },
		"a cause":             func(w *store.Write) { w.Cause = "x" },
		"a settled version":   func(w *store.Write) { w.Settled = workflow.StatusCompleted },
		"an expected version": func(w *store.Write) { w.ExpectedVersion = inst.Version },
		"a deadline":          func(w *store.Write) { w.Deadline = &now },
		"no update":           func(w *store.Write) { w.Update = nil },
		"no instance id":      func(w *store.Write) { w.ID = "" },
		"an unknown From":     func(w *store.Write) { w.From = "SLEEPING" },
		"an unguarded update": func(w *store.Write) { w.Update[0].Guard = store.TaskGuard{} },
		"a leased row without its lease": func(w *store.Write) {
			w.Update[0].Guard = store.TaskGuard{Status: store.TaskLeased, LeaseUntil: now}
		},
		"another instance's task": func(w *store.Write) {
			w.Update[0].Task.InstanceID = "other"
		},
		"a task twice": func(w *store.Write) { w.Update = append(w.Update, w.Update[0]) },
	} {
		w := ok()
		change(w)
		_, err := b.s.Apply(b.ctx, w)
		wantErrorIs(t, "tasks-only Apply with "+what, err, store.ErrInvalidArgument)
	}
	assertTask(t, "task w after the refused writes", queued, b.lockTask(t, eq, queued.ID))
	assertTask(t, "task a after the refused writes", leased, b.lockTask(t, eq, leased.ID))
	b.unchanged(t, "instance after the refused writes", snap)
}
