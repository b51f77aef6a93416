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
	{"ApplyTasks_leaseEnded", testApplyTasksLeaseEnded},
	{"ApplyTasks_invalid", testApplyTasksInvalid},
	{"ApplyTasks_inTx", testApplyTasksInTx},
}

// tasksOnly is a TasksOnly write of inst's tasks at now.
func tasksOnly(inst string, now time.Time, updates ...store.TaskWrite) *store.Write {
	return &store.Write{ID: inst, TasksOnly: true, Now: now, Update: updates, Notify: true}
}

// leaseGuard and rowGuard guard a task write by tk's lease, or by its
// status and attempt.
func leaseGuard(tk *store.Task) store.TaskGuard { return store.TaskGuard{Lease: tk.Lease} }
func rowGuard(tk *store.Task) store.TaskGuard {
	return store.TaskGuard{Status: tk.Status, Attempt: tk.Attempt}
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
		store.TaskWrite{Task: &extended, Guard: leaseGuard(leased)},
		store.TaskWrite{Task: &cancelled, Guard: rowGuard(queued)}))
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
	staleAttempt := rowGuard(queued)
	staleAttempt.Attempt++
	for _, c := range []struct {
		what string
		w    *store.Write
		miss string
	}{
		{"a stale lease (with a write that holds)", tasksOnly(inst.ID, now,
			store.TaskWrite{Task: &cancelled, Guard: rowGuard(queued)},
			store.TaskWrite{Task: leased, Guard: leaseGuard(&stale)}), leased.ID},
		{"a lease ended at Now", tasksOnly(inst.ID, leased.LeaseUntil,
			store.TaskWrite{Task: leased, Guard: leaseGuard(leased)}), leased.ID},
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
	w := tasksOnly(inst.ID, b.clock.Now(), store.TaskWrite{Task: &cancelled, Guard: rowGuard(queued)})
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

// testApplyTasksLeaseEnded: a LeaseEnded guard holds only once the lease
// has ended by Now, also in a versioned Apply (a lease expiry).
func testApplyTasksLeaseEnded(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, _ := b.applyFixture(t, "w")
	requeued := *leased
	requeued.Status, requeued.Lease, requeued.LeaseOwner, requeued.LeaseUntil = store.TaskQueued, "", "", time.Time{}
	ended := store.TaskGuard{Lease: leased.Lease, LeaseEnded: true}
	// Before the lease ends: a miss.
	_, err := b.s.Apply(b.ctx, tasksOnly(inst.ID, leased.LeaseUntil.Add(-time.Millisecond), store.TaskWrite{Task: &requeued, Guard: ended}))
	var miss *store.TaskConflictError
	if !errors.As(err, &miss) {
		t.Errorf("an expiry guard before the lease ended = %v, want a *TaskConflictError", err)
	}
	assertTask(t, "the running lease", leased, b.lockTask(t, eq, leased.ID))
	// Once ended, in a version of the instance.
	cur := b.get(t, inst.ID)
	got, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: cur.Version, From: cur.Status, Status: cur.Status,
		State: cur.State, Cause: "lease expired", Now: leased.LeaseUntil, Update: []store.TaskWrite{{Task: &requeued, Guard: ended}}})
	if err != nil || got.Version != cur.Version+1 {
		t.Fatalf("an expiry guard once the lease ended = %v, %v; want version %d", got, err, cur.Version+1)
	}
	assertTask(t, "the expired task", &requeued, b.lockTask(t, eq, leased.ID))
	// The guard names the lease: it does not hold any more.
	_, err = b.s.Apply(b.ctx, tasksOnly(inst.ID, leased.LeaseUntil.Add(time.Hour), store.TaskWrite{Task: &requeued, Guard: ended}))
	if !errors.As(err, &miss) {
		t.Errorf("an expiry guard of a lease no longer held = %v, want a *TaskConflictError", err)
	}
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
		return tasksOnly(inst.ID, now, store.TaskWrite{Task: &c, Guard: rowGuard(queued)})
	}
	for what, change := range map[string]func(w *store.Write){
		"an insert":             func(w *store.Write) { w.Insert = []*store.Task{newTask(inst.ID, "new", "q1", now)} },
		"a status":              func(w *store.Write) { w.Status = workflow.StatusRunning },
		"a state":               func(w *store.Write) { w.State = inst.State },
		"a cause":               func(w *store.Write) { w.Cause = "x" },
		"a settled version":     func(w *store.Write) { w.Settled = workflow.StatusCompleted },
		"an expected version":   func(w *store.Write) { w.ExpectedVersion = inst.Version },
		"a deadline":            func(w *store.Write) { w.Deadline = &now },
		"no update":             func(w *store.Write) { w.Update = nil },
		"no instance id":        func(w *store.Write) { w.ID = "" },
		"an unknown From":       func(w *store.Write) { w.From = "SLEEPING" },
		"an unguarded update":   func(w *store.Write) { w.Update[0].Guard = store.TaskGuard{} },
		"an unnamed lease ends": func(w *store.Write) { w.Update[0].Guard = store.TaskGuard{LeaseEnded: true, Status: store.TaskQueued} },
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

// testApplyTasksInTx: inside WithTx a tasks-only write is visible in the
// transaction and committed or rolled back with it; a miss leaves the
// transaction usable.
func testApplyTasksInTx(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, leased, queued := b.applyFixture(t, "w")
	now := b.clock.Now()
	cancelled := *queued
	cancelled.Status = store.TaskCancelled
	err := b.inEngineTx(func(tx store.Querier, teq store.TaskQuerier) error {
		stale := *leased
		stale.Lease = "stale"
		if _, err := tx.Apply(b.ctx, tasksOnly(inst.ID, now, store.TaskWrite{Task: leased, Guard: leaseGuard(&stale)})); !errors.Is(err, store.ErrConflict) {
			t.Errorf("tx: a tasks-only miss = %v, want a conflict", err)
		}
		if _, err := tx.Apply(b.ctx, tasksOnly(inst.ID, now, store.TaskWrite{Task: &cancelled, Guard: rowGuard(queued)})); err != nil {
			return err
		}
		got, err := teq.Task(b.ctx, queued.ID)
		if err == nil && got.Status != store.TaskCancelled {
			t.Errorf("tx: task w after the write is %s, want CANCELLED", got.Status)
		}
		return err
	})
	if err != nil {
		t.Fatalf("WithTx: %v", err)
	}
	assertTask(t, "task w after the transaction", &cancelled, b.lockTask(t, eq, queued.ID))
	assertTask(t, "task a after the transaction", leased, b.lockTask(t, eq, leased.ID))

	extended := *leased
	extended.LeaseUntil = leased.LeaseUntil.Add(time.Hour)
	err = b.inEngineTx(func(tx store.Querier, _ store.TaskQuerier) error {
		if _, err := tx.Apply(b.ctx, tasksOnly(inst.ID, now, store.TaskWrite{Task: &extended, Guard: leaseGuard(leased)})); err != nil {
			return err
		}
		return errBoom
	})
	wantErrorIs(t, "WithTx rolled back", err, errBoom)
	assertTask(t, "task a after a rolled-back write", leased, b.lockTask(t, eq, leased.ID))
}
