package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

func testTasksInsertDefaults(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	now := b.clock.Advance(time.Minute + 1)
	runAt := clockStart.Add(30*time.Second + 1) // not UTC, not a whole microsecond

	// No id, no status, no input: the store fills them.
	bare := &store.Task{InstanceID: inst.ID, StepID: "a", Queue: "q1", MaxAttempts: 3, RunAt: runAt}
	b.insertTasks(t, bare)
	tasks := b.tasksOf(t, eq, inst.ID)
	if len(tasks) != 1 {
		t.Fatalf("TasksOfInstance after inserting one task = %d tasks", len(tasks))
	}
	got := tasks[0]
	if u, err := uuid.Parse(got.ID); err != nil || u.Version() != 7 {
		t.Errorf("generated task id %q is not a UUIDv7 (store.NewID): %v", got.ID, err)
	}
	if bare.ID != "" && bare.ID != got.ID {
		t.Errorf("Apply set the caller's task id to %q but stored %q", bare.ID, got.ID)
	}
	want := stored(bare, now)
	want.ID = got.ID
	assertTask(t, "task inserted with defaults", want, got)
	if got.Status != store.TaskQueued || got.Attempt != 0 || got.Lease != "" || !got.LeaseUntil.IsZero() || !got.AttemptDeadline.IsZero() {
		t.Errorf("new task: status %s, attempt %d, lease %q, lease_until %v, attempt_deadline %v; want QUEUED, 0, \"\", zero, zero",
			got.Status, got.Attempt, got.Lease, got.LeaseUntil, got.AttemptDeadline)
	}
	assertJSON(t, "input of a task inserted without one", []byte(`null`), got.Input)
	assertTask(t, "Task of the new task", want, b.lockTask(t, eq, got.ID))

	// Several tasks at once, with ids and inputs given, across instances.
	other := b.running(t, "other")
	now = b.clock.Advance(time.Second)
	batch := []*store.Task{
		withID("t-b", newTask(inst.ID, "b", "q1", runAt)),
		withID("t-c", newTask(inst.ID, "c", store.QueueSleep, runAt.Add(time.Hour))),
		withID("t-o", newTask(other.ID, "a", store.QueueHTTP, runAt)),
	}
	batch[1].Input = json.RawMessage(bigDoc)
	batch[2].Status = store.TaskQueued
	batch[2].MaxAttempts = 1
	b.insertTasks(t, batch...)
	for _, tk := range batch {
		assertTask(t, "Task("+tk.ID+")", stored(tk, now), b.lockTask(t, eq, tk.ID))
	}
	if n := len(b.tasksOf(t, eq, inst.ID)); n != 3 {
		t.Errorf("instance inst has %d tasks, want 3", n)
	}

	// Inside a transaction, for an instance created in it.
	err := b.inEngineTx(func(tx store.Querier, teq store.TaskQuerier) error {
		if _, err := tx.Create(b.ctx, store.CreateParams{ID: "tx-inst", Status: workflow.StatusRunning}); err != nil {
			return fmt.Errorf("tx.Create: %w", err)
		}
		if err := InsertTasks(b.ctx, tx, []*store.Task{withID("t-tx", newTask("tx-inst", "a", "q1", runAt))}); err != nil {
			return fmt.Errorf("tx.Apply inserting: %w", err)
		}
		tk, err := teq.Task(b.ctx, "t-tx")
		if err != nil {
			return fmt.Errorf("tx.Task: %w", err)
		}
		if tk.InstanceID != "tx-inst" || tk.Status != store.TaskQueued {
			return fmt.Errorf("tx.Task = instance %q, status %s; want tx-inst, QUEUED", tk.InstanceID, tk.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WithTx: %v", err)
	}
	assertTask(t, "task inserted in a transaction", stored(withID("t-tx", newTask("tx-inst", "a", "q1", runAt)), now), b.lockTask(t, eq, "t-tx"))
}

func testTasksInsertDuplicate(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	orig := withID("t-a", newTask(inst.ID, "a", "q1", clockStart))
	b.insertTasks(t, orig)
	before := b.lockTask(t, eq, "t-a")
	b.clock.Advance(time.Second)

	for what, tasks := range map[string][]*store.Task{
		"the same (instance, step)":                    {withID("t-a2", newTask(inst.ID, "a", "q2", clockStart.Add(time.Hour)))},
		"a generated id for the same (instance, step)": {newTask(inst.ID, "a", "q2", clockStart)},
		"the same id":                   {withID("t-a", newTask(inst.ID, "other", "q2", clockStart))},
		"a batch with one duplicate":    {withID("t-x", newTask(inst.ID, "x", "q1", clockStart)), withID("t-a3", newTask(inst.ID, "a", "q1", clockStart))},
		"a batch duplicating in itself": {withID("t-y1", newTask(inst.ID, "y", "q1", clockStart)), withID("t-y2", newTask(inst.ID, "y", "q1", clockStart))},
	} {
		err := InsertTasks(b.ctx, b.s, tasks)
		wantErrorIs(t, "inserting tasks with "+what, err, store.ErrExists)
	}
	// The existing task was not overwritten.
	assertTask(t, "the original task", before, b.lockTask(t, eq, "t-a"))
	for _, id := range []string{"t-a2", "t-a3"} {
		_, err := eq.Task(b.ctx, id)
		wantErrorIs(t, "Task of a task refused as a duplicate", err, store.ErrNotFound)
	}
	// The same step of another instance is no duplicate.
	other := b.running(t, "other")
	b.insertTasks(t, withID("t-other-a", newTask(other.ID, "a", "q1", clockStart)))
}

func testTasksNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	b.insertTasks(t, withID("t-a", newTask(inst.ID, "a", "q1", clockStart)))
	before := b.lockTask(t, eq, "t-a")
	check := func(where string, eq store.TaskQuerier) error {
		for _, id := range []string{"missing", "T-A", "", "' OR '1'='1"} {
			tk, err := eq.Task(b.ctx, id)
			if !errors.Is(err, store.ErrNotFound) || tk != nil {
				return fmt.Errorf("%s: Task(%q) = %v, %v (%T); want nil, errors.Is(err, store.ErrNotFound)", where, id, tk, err, err)
			}
		}
		tasks, err := eq.TasksOfInstance(b.ctx, "missing", store.LockNone)
		if err != nil || len(tasks) != 0 {
			return fmt.Errorf("%s: TasksOfInstance of an unknown instance = %v, %v; want none, nil", where, taskIDs(tasks), err)
		}
		return nil
	}
	if err := check("on the store", eq); err != nil {
		t.Error(err)
	}
	// Inside a transaction, which stays usable.
	err := b.inEngineTx(func(tx store.Querier, teq store.TaskQuerier) error {
		if err := check("in a transaction", teq); err != nil {
			return err
		}
		_, err := tx.Create(b.ctx, store.CreateParams{ID: "after"})
		return err
	})
	if err != nil {
		t.Errorf("WithTx: %v", err)
	}
	b.get(t, "after")
	assertTask(t, "the existing task", before, b.lockTask(t, eq, "t-a"))
}

// testTasksUpdateRoundTrip: a task row written alone (a TasksOnly Apply)
// keeps every field as given.
func testTasksUpdateRoundTrip(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	b.insertTasks(t, withID("t-a", newTask(inst.ID, "a", "q1", clockStart)), withID("t-b", newTask(inst.ID, "b", "q1", clockStart)))
	created := b.lockTask(t, eq, "t-a")
	otherBefore := b.lockTask(t, eq, "t-b")

	// Every mutable field changes; times are not UTC and not whole microseconds.
	now := b.clock.Advance(time.Hour + 1)
	tk := *created
	tk.Status = store.TaskLeased
	tk.Attempt = 2
	tk.MaxAttempts = 5
	tk.RunAt = clockStart.Add(10*time.Minute + 1)
	tk.Lease = "lease-1"
	tk.LeaseOwner = "node-7"
	tk.LeaseUntil = clockStart.Add(20*time.Minute + 1)
	tk.AttemptDeadline = clockStart.Add(25*time.Minute + 1)
	tk.Input = json.RawMessage(bigDoc)
	tk.LastError = "attempt 1: connection refused"
	b.updateTask(t, &tk)
	checkTime(t, "UpdatedAt set on the caller's task", tk.UpdatedAt, now)
	want := tk
	want.RunAt = store.Timestamp(tk.RunAt)
	want.LeaseUntil = store.Timestamp(tk.LeaseUntil)
	want.AttemptDeadline = store.Timestamp(tk.AttemptDeadline)
	want.UpdatedAt = store.Timestamp(now)
	want.CreatedAt = created.CreatedAt
	assertTask(t, "Task after the write", &want, b.lockTask(t, eq, "t-a"))

	// Zero times are stored as NULL and read back as zero; empty strings stay empty.
	now = b.clock.Advance(time.Minute)
	tk2 := *b.lockTask(t, eq, "t-a")
	tk2.Status = store.TaskQueued
	tk2.Lease, tk2.LeaseOwner = "", ""
	tk2.LeaseUntil, tk2.AttemptDeadline = time.Time{}, time.Time{}
	tk2.LastError = ""
	tk2.Input = json.RawMessage(`null`)
	b.updateTask(t, &tk2)
	got := b.lockTask(t, eq, "t-a")
	if !got.LeaseUntil.IsZero() || !got.AttemptDeadline.IsZero() {
		t.Errorf("after a write with zero times: lease_until %v, attempt_deadline %v; want zero times", got.LeaseUntil, got.AttemptDeadline)
	}
	want2 := tk2
	want2.UpdatedAt = store.Timestamp(now)
	assertTask(t, "Task after the write with zero times", &want2, got)

	// Every status round-trips (a leased row with its lease).
	for _, st := range []store.TaskStatus{store.TaskLeased, store.TaskDone, store.TaskFailed, store.TaskCancelled, store.TaskQueued} {
		cur := b.lockTask(t, eq, "t-a")
		cur.Status, cur.Lease, cur.LeaseUntil = st, "", time.Time{}
		if st == store.TaskLeased {
			cur.Lease, cur.LeaseUntil = "l-a", now.Add(time.Hour)
		}
		b.updateTask(t, cur)
		if got := b.lockTask(t, eq, "t-a"); got.Status != st {
			t.Errorf("status after a write of %s = %s", st, got.Status)
		}
	}

	// Inside a transaction: the write is visible in it and committed with it.
	now = b.clock.Advance(time.Minute)
	err := b.inEngineTx(func(tx store.Querier, teq store.TaskQuerier) error {
		cur, err := teq.Task(b.ctx, "t-a")
		if err != nil {
			return fmt.Errorf("tx.Task: %w", err)
		}
		cur.Attempt = 9
		cur.LastError = "in tx"
		if err := UpdateTask(b.ctx, tx, cur, now); err != nil {
			return fmt.Errorf("tx.Apply: %w", err)
		}
		again, err := teq.Task(b.ctx, "t-a")
		if err != nil {
			return fmt.Errorf("tx.Task again: %w", err)
		}
		if again.Attempt != 9 || again.LastError != "in tx" {
			return fmt.Errorf("tx.Task after tx.Apply: attempt %d, last error %q; want 9, \"in tx\"", again.Attempt, again.LastError)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WithTx: %v", err)
	}
	got = b.lockTask(t, eq, "t-a")
	if got.Attempt != 9 || got.LastError != "in tx" {
		t.Errorf("after the transaction: attempt %d, last error %q; want 9, \"in tx\"", got.Attempt, got.LastError)
	}
	checkTime(t, "updated_at after the transaction", got.UpdatedAt, now)
	// A rolled-back update is gone.
	err = b.inEngineTx(func(tx store.Querier, teq store.TaskQuerier) error {
		cur, err := teq.Task(b.ctx, "t-a")
		if err != nil {
			return err
		}
		cur.Attempt = 100
		if err := UpdateTask(b.ctx, tx, cur, now); err != nil {
			return err
		}
		return errBoom
	})
	wantErrorIs(t, "WithTx rolled back", err, errBoom)
	if got := b.lockTask(t, eq, "t-a"); got.Attempt != 9 {
		t.Errorf("attempt after a rolled-back write = %d, want 9", got.Attempt)
	}
	assertTask(t, "the other task", otherBefore, b.lockTask(t, eq, "t-b"))
}

func testTasksOfInstanceOrder(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	other := b.running(t, "other")
	// Inserted out of step order, with ids and run_at in yet other orders.
	steps := []string{"delta", "alpha", "gamma", "beta", "alpha2"}
	var tasks []*store.Task
	for i, s := range steps {
		tasks = append(tasks, withID(fmt.Sprintf("t%d", 9-i), newTask(inst.ID, s, "q1", clockStart.Add(time.Duration(i)*time.Second))))
	}
	b.insertTasks(t, tasks[:2]...)
	b.insertTasks(t, tasks[2:]...)
	b.insertTasks(t, withID("o1", newTask(other.ID, "alpha", "q1", clockStart)))
	now := b.clock.Now()
	byStep := slices.Clone(tasks)
	slices.SortFunc(byStep, func(x, y *store.Task) int { return strings.Compare(x.StepID, y.StepID) })
	var want []*store.Task
	for _, tk := range byStep {
		want = append(want, stored(tk, now))
	}
	for _, mode := range []store.LockMode{store.LockNone, store.LockWait, store.LockSkipLocked} {
		got, err := eq.TasksOfInstance(b.ctx, inst.ID, mode)
		if err != nil {
			t.Fatalf("TasksOfInstance(mode %d): %v", mode, err)
		}
		assertTasks(t, fmt.Sprintf("TasksOfInstance(mode %d)", mode), want, got)
		err = b.inEngineTx(func(_ store.Querier, teq store.TaskQuerier) error {
			got, err := teq.TasksOfInstance(b.ctx, inst.ID, mode)
			if err != nil {
				return err
			}
			assertTasks(t, fmt.Sprintf("tx.TasksOfInstance(mode %d)", mode), want, got)
			return nil
		})
		if err != nil {
			t.Errorf("tx.TasksOfInstance(mode %d): %v", mode, err)
		}
	}
	if ids := taskIDs(b.tasksOf(t, eq, other.ID)); !slices.Equal(ids, []string{"o1"}) {
		t.Errorf("tasks of the other instance = %v, want [o1]", ids)
	}
	noTasks := b.running(t, "none")
	if got := b.tasksOf(t, eq, noTasks.ID); len(got) != 0 {
		t.Errorf("tasks of an instance without tasks = %v, want none", taskIDs(got))
	}
}

// holdTx runs first in a transaction in another goroutine and keeps the
// transaction open until release is closed; held is closed once first has
// returned. Then it runs then (if not nil) and commits. The returned channel
// yields the transaction's error.
func (b *bundle) holdTx(first func(store.Querier, store.TaskQuerier) error, held chan<- struct{}, release <-chan struct{},
	then func(store.Querier, store.TaskQuerier) error,
) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- b.inEngineTx(func(tx store.Querier, teq store.TaskQuerier) error {
			err := first(tx, teq)
			close(held)
			if err != nil {
				return err
			}
			select {
			case <-release:
			case <-time.After(20 * time.Second):
				return errors.New("the held transaction was never released")
			}
			if then != nil {
				return then(tx, teq)
			}
			return nil
		})
	}()
	return done
}

// holdLock is holdTx with a claim that locks task id first (a QUEUED task
// due at clockStart, the only one of its queue); then gets the locked task.
func (b *bundle) holdLock(id string, held chan<- struct{}, release <-chan struct{}, then func(tx store.Querier, tk *store.Task) error) <-chan error {
	var tk *store.Task
	first := func(_ store.Querier, teq store.TaskQuerier) error {
		row, err := teq.Task(b.ctx, id)
		if err != nil {
			return err
		}
		got, err := Claimable(b.ctx, teq, []string{row.Queue}, clockStart, 10)
		if err != nil {
			return fmt.Errorf("claim of %q: %w", id, err)
		}
		if ids := taskIDs(got); !slices.Equal(ids, []string{id}) {
			return fmt.Errorf("the claim that locks %q locked %v", id, ids)
		}
		tk = got[0]
		return nil
	}
	var after func(store.Querier, store.TaskQuerier) error
	if then != nil {
		after = func(tx store.Querier, _ store.TaskQuerier) error { return then(tx, tk) }
	}
	return b.holdTx(first, held, release, after)
}

// Claimable locks what a claim of queues at now would claim, through eq
// (inside a transaction, until it ends), writes nothing and returns it.
func Claimable(ctx context.Context, eq store.TaskQuerier, queues []string, now time.Time, limit int) ([]*store.Task, error) {
	var tasks []*store.Task
	err := eq.ClaimTasks(ctx, store.ClaimParams{Queues: queues, Now: now, Limit: limit}, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		tasks = make([]*store.Task, len(locked))
		for i, c := range locked {
			tasks[i] = c.Task
		}
		return nil, nil
	})
	return tasks, err
}

// testTasksOfInstanceLockModes: with row locks, SkipLocked leaves out the
// tasks another transaction locked and None reads them without waiting.
func testTasksOfInstanceLockModes(t *testing.T, h Harness) {
	b := setup(t, h)
	if !b.s.Capabilities().ConcurrentWriters {
		t.Skip("the backend serialises transactions: lock modes are satisfied trivially")
	}
	inst := b.running(t, "inst")
	b.insertTasks(t,
		withID("t-a", newTask(inst.ID, "a", "q1", clockStart)),
		withID("t-b", newTask(inst.ID, "b", "q2", clockStart)),
		withID("t-c", newTask(inst.ID, "c", "q1", clockStart)),
	)
	locked, release := make(chan struct{}), make(chan struct{})
	done := b.holdLock("t-b", locked, release, nil)
	<-locked
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	err := b.s.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
		teq, err := engineTx(tx)
		if err != nil {
			return err
		}
		got, err := teq.TasksOfInstance(ctx, inst.ID, store.LockSkipLocked)
		if err != nil {
			return fmt.Errorf("TasksOfInstance(LockSkipLocked): %w", err)
		}
		if ids := taskIDs(got); !slices.Equal(ids, []string{"t-a", "t-c"}) {
			t.Errorf("TasksOfInstance(LockSkipLocked) while t-b is locked = %v, want [t-a t-c]", ids)
		}
		got, err = teq.TasksOfInstance(ctx, inst.ID, store.LockNone)
		if err != nil {
			return fmt.Errorf("TasksOfInstance(LockNone): %w", err)
		}
		if ids := taskIDs(got); !slices.Equal(ids, []string{"t-a", "t-b", "t-c"}) {
			t.Errorf("TasksOfInstance(LockNone) while t-b is locked = %v, want all three", ids)
		}
		return nil
	})
	close(release)
	if err != nil {
		t.Errorf("second transaction: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("locking transaction: %v", err)
	}
}

// testTasksLockWaitWaits: TasksOfInstance with LockWait in a transaction
// waits for another transaction's lock on one of the tasks and then reads
// what it committed.
func testTasksLockWaitWaits(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.running(t, "inst")
	b.insertTasks(t, withID("t-a", newTask(inst.ID, "a", "q1", clockStart)))
	locked, release := make(chan struct{}), make(chan struct{})
	first := b.holdLock("t-a", locked, release, func(tx store.Querier, tk *store.Task) error {
		tk.Attempt = 1
		tk.LastError = "first"
		return UpdateTask(b.ctx, tx, tk, clockStart)
	})
	<-locked
	type result struct {
		tk  *store.Task
		err error
	}
	second := make(chan result, 1)
	go func() {
		var r result
		r.err = b.inEngineTx(func(_ store.Querier, teq store.TaskQuerier) error {
			tasks, err := teq.TasksOfInstance(b.ctx, inst.ID, store.LockWait)
			if err == nil && len(tasks) == 1 {
				r.tk = tasks[0]
			}
			return err
		})
		second <- r
	}()
	select {
	case r := <-second:
		t.Errorf("TasksOfInstance(LockWait) returned (%v, %v) while the first transaction held the lock", taskIDs([]*store.Task{r.tk}), r.err)
		close(release)
		<-first
		return
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	select {
	case r := <-second:
		if r.err != nil {
			t.Fatalf("second transaction: %v", r.err)
		}
		if r.tk == nil || r.tk.Attempt != 1 || r.tk.LastError != "first" {
			t.Errorf("TasksOfInstance(LockWait) read %+v; want the first transaction's attempt 1, \"first\"", r.tk)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TasksOfInstance(LockWait) still waits 10s after the first transaction committed")
	}
}

// testTasksInsertLeased: a task inserted already leased (the engine leases a
// step it schedules to the worker that scheduled it) keeps every field.
func testTasksInsertLeased(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "inst")
	now := b.clock.Advance(time.Second)
	tk := &store.Task{
		ID: store.NewID(), InstanceID: inst.ID, StepID: "next", Queue: "q1", Status: store.TaskLeased,
		Attempt: 1, MaxAttempts: 3, RunAt: now, Lease: "lease-token", LeaseOwner: "node-a",
		LeaseUntil: now.Add(30 * time.Second), AttemptDeadline: now.Add(10 * time.Second),
		Input: json.RawMessage(`{"n": 1}`),
	}
	want := stored(tk, now)
	want.LeaseUntil, want.AttemptDeadline = store.Timestamp(tk.LeaseUntil), store.Timestamp(tk.AttemptDeadline)
	b.insertTasks(t, tk)
	assertTask(t, "task inserted leased", want, b.lockTask(t, eq, tk.ID))
	// It is not claimable, and it expires like any lease.
	got, err := Claimable(b.ctx, eq, []string{"q1"}, now.Add(time.Minute), 10)
	if err != nil || len(got) != 0 {
		t.Errorf("a claim found %d tasks (%v): a leased task is not claimable", len(got), err)
	}
	expired, err := eq.Due(b.ctx, store.DueParams{Kind: store.DueLeases, Now: now.Add(time.Minute), Limit: 10})
	if err != nil || len(expired) != 1 || expired[0].Task.ID != tk.ID {
		t.Errorf("Due(DueLeases) after the lease: %v, %v", expired, err)
	}
}
