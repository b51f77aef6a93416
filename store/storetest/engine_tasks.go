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
		tasks, err := eq.TasksOfInstance(b.ctx, "missing")
		if err != nil || len(tasks) != 0 {
			return fmt.Errorf("%s: TasksOfInstance of an unknown instance = %v, %v; want none, nil", where, taskIDs(tasks), err)
		}
		return nil
	}
	if err := check("on the store", eq); err != nil {
		t.Error(err)
	}
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
	got, err := eq.TasksOfInstance(b.ctx, inst.ID)
	if err != nil {
		t.Fatalf("TasksOfInstance: %v", err)
	}
	assertTasks(t, "TasksOfInstance", want, got)
	if ids := taskIDs(b.tasksOf(t, eq, other.ID)); !slices.Equal(ids, []string{"o1"}) {
		t.Errorf("tasks of the other instance = %v, want [o1]", ids)
	}
	noTasks := b.running(t, "none")
	if got := b.tasksOf(t, eq, noTasks.ID); len(got) != 0 {
		t.Errorf("tasks of an instance without tasks = %v, want none", taskIDs(got))
	}
}

// Claim claims up to limit tasks of queues at now through eq, leased to
// ClaimOwner for a minute, and returns them as leased.
func Claim(ctx context.Context, eq store.TaskQuerier, queues []string, now time.Time, limit int) ([]*store.Task, error) {
	claimed, _, err := eq.ClaimTasks(ctx, claimOf(ClaimOwner, queues, now, limit))
	return claimedTasks(claimed), err
}

// ClaimOwner is the owner Claim leases tasks to.
const ClaimOwner = "storetest"

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
	got, err := Claim(b.ctx, eq, []string{"q1"}, now.Add(time.Minute), 10)
	if err != nil || len(got) != 0 {
		t.Errorf("a claim found %d tasks (%v): a leased task is not claimable", len(got), err)
	}
	expired, err := eq.Due(b.ctx, store.DueParams{Kind: store.DueLeases, Now: now.Add(time.Minute), Limit: 10})
	if err != nil || len(expired) != 1 || expired[0].Task.ID != tk.ID {
		t.Errorf("Due(DueLeases) after the lease: %v, %v", expired, err)
	}
}
