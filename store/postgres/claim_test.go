package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ClaimTasks on the store runs its transaction over two pipelined batches on
// one connection. These tests break it between and inside the batches and
// check that nothing is half written, no session stays in a transaction, no
// connection stays acquired and nothing stays locked.

// claimFixture: RUNNING instances a and b with one queued task each (ta, tb).
func claimFixture(t *testing.T) (*Store, time.Time) {
	t.Helper()
	s, _ := setup(t, Options{})
	now := time.Now().UTC()
	for _, id := range []string{"a", "b"} {
		create(t, s, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepsState(map[string]workflow.StepStatus{"s": workflow.StepRunning}),
			Tasks: []*store.Task{{ID: "t" + id, InstanceID: id, StepID: "s", Queue: "q", MaxAttempts: 1, RunAt: now.Add(-time.Second)}}})
	}
	return s, now
}

// leaseAll leases every locked task with a write of its instance; with
// badB, b's new state is one that jsonb refuses (on the server).
func leaseAll(locked []store.Claimable, now time.Time, badB bool) []*store.ClaimWrite {
	var ws []*store.ClaimWrite
	for _, c := range locked {
		tk := c.Task
		tk.Status, tk.Attempt, tk.Lease, tk.LeaseOwner, tk.LeaseUntil = store.TaskLeased, 1, "L-"+tk.ID, "me", now.Add(time.Minute)
		st := c.Instance.State.Clone()
		if badB && c.Instance.ID == "b" {
			st.Variables = map[string]json.RawMessage{"x": json.RawMessage(`"\u0000"`)} // SQLSTATE 22P05
		}
		ws = append(ws, &store.ClaimWrite{Tasks: []*store.Task{tk}, SetState: true, ExpectedVersion: c.Instance.Version, State: st, Cause: "deliver"})
	}
	return ws
}

// claimClean checks that no session is idle in a transaction, no
// connection is acquired, both tasks have status want, and a new claim
// locks both of them (nothing is left locked).
func claimClean(t *testing.T, s *Store, want store.TaskStatus, claimable int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); idleInTransaction(t, s) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a session is still idle in a transaction")
		}
	}
	if n := s.pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d pool connections are still acquired", n)
	}
	for _, id := range []string{"ta", "tb"} {
		tk, err := s.Task(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != want {
			t.Errorf("task %s: %s, want %s", id, tk.Status, want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var n int
	err := s.ClaimTasks(ctx, store.ClaimParams{Queues: []string{"q"}, Now: time.Now(), Limit: 10}, func(l []store.Claimable) ([]*store.ClaimWrite, error) {
		n = len(l)
		return nil, nil
	})
	if err != nil || n != claimable {
		t.Errorf("a later claim locked %d tasks (%v), want %d", n, err, claimable)
	}
}

// A write that fails on the server after another was made rolls the whole
// claim back; COMMIT is never run.
func TestClaimTasksServerErrorInTheWrites(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t)
	var ws []*store.ClaimWrite
	err := s.ClaimTasks(t.Context(), store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10}, func(l []store.Claimable) ([]*store.ClaimWrite, error) {
		ws = leaseAll(l, now, true)
		return ws, nil
	})
	if err == nil || len(ws) != 2 {
		t.Fatalf("ClaimTasks = %v with %d writes; want an error from the second write", err, len(ws))
	}
	for _, w := range ws {
		if w.Written {
			t.Errorf("write of %s reported written", w.Tasks[0].InstanceID)
		}
	}
	if a, err := s.Get(t.Context(), "a"); err != nil || a.Version != 0 {
		t.Errorf("instance a after the failed claim: %v, %v; want version 0", a, err)
	}
	claimClean(t, s, store.TaskQueued, 2)
}

// A context cancelled while decide runs: the writes are not sent.
func TestClaimTasksCancelledInDecide(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := s.ClaimTasks(ctx, store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10}, func(l []store.Claimable) ([]*store.ClaimWrite, error) {
		cancel()
		return leaseAll(l, now, false), nil
	})
	if !errors.Is(err, context.Canceled) && !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ClaimTasks = %v, want a cancellation", err)
	}
	claimClean(t, s, store.TaskQueued, 2)
}

// A panic in decide rolls back and releases the connection.
func TestClaimTasksPanicInDecide(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_ = s.ClaimTasks(t.Context(), store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10}, func([]store.Claimable) ([]*store.ClaimWrite, error) {
			panic("decide failed")
		})
	}()
	claimClean(t, s, store.TaskQueued, 2)
}

// Once decided, a claim is finished even if its context ends while its
// writes wait for an instance lock: otherwise a commit whose answer was lost
// would leave the tasks leased to a caller that does not know it.
func TestClaimTasksFinishesOnceDecided(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t)
	blocker, err := s.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(t.Context(), `SELECT 1 FROM workflow_instances WHERE id = 'b' FOR UPDATE`); err != nil {
		_ = blocker.Rollback(t.Context())
		t.Fatal(err)
	}
	// The clocks start once the claim has decided (a loaded machine may take
	// longer than any fixed delay to read): ctx ends while the write of b
	// waits for b's lock, then the lock is released.
	ctx, cancel := context.WithCancel(t.Context())
	released := make(chan error, 1)
	release := func() { released <- blocker.Commit(context.WithoutCancel(t.Context())) }
	decided := false
	defer func() {
		if !decided {
			release()
		}
		if err := <-released; err != nil {
			t.Errorf("the transaction holding instance b: %v", err)
		}
	}()
	var ws []*store.ClaimWrite
	err = s.ClaimTasks(ctx, store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10}, func(l []store.Claimable) ([]*store.ClaimWrite, error) {
		decided = true
		time.AfterFunc(300*time.Millisecond, cancel)
		time.AfterFunc(800*time.Millisecond, release)
		ws = leaseAll(l, now, false)
		return ws, nil
	})
	if err != nil {
		t.Fatalf("ClaimTasks = %v, want the decided claim finished", err)
	}
	for _, w := range ws {
		if !w.Written {
			t.Errorf("write of %s not made", w.Tasks[0].InstanceID)
		}
	}
	claimClean(t, s, store.TaskLeased, 0)
}

// A group's claim locks the tasks' instances too and skips a task whose
// instance another transaction holds, instead of waiting for it: a group
// holds its commits' instance locks, so a claim write that waited could
// close a cycle with another group.
func TestGroupClaimSkipsLockedInstances(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t)
	blocker, err := s.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.WithoutCancel(t.Context())) }()
	if _, err := blocker.Exec(t.Context(), `SELECT 1 FROM workflow_instances WHERE id = 'b' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var locked []string
	var ws []*store.ClaimWrite
	claim := &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10}, Decide: func(l []store.Claimable) ([]*store.ClaimWrite, error) {
		for _, c := range l {
			locked = append(locked, c.Task.ID)
		}
		ws = leaseAll(l, now, false)
		return ws, nil
	}}
	if _, _, err := s.ApplyGroup(ctx, nil, nil, claim); err != nil {
		t.Fatalf("ApplyGroup with a claim while b is locked: %v", err)
	}
	if len(locked) != 1 || locked[0] != "ta" || !ws[0].Written {
		t.Fatalf("the claim locked %v (written: %v), want ta alone", locked, ws)
	}
	if err := blocker.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]store.TaskStatus{"ta": store.TaskLeased, "tb": store.TaskQueued} {
		if tk, err := s.Task(t.Context(), id); err != nil || tk.Status != want {
			t.Errorf("task %s: %v, %v; want %s", id, tk, err, want)
		}
	}
}

// A claim write that fails on the server rolls back the whole group: its
// creates, and the claim's other writes.
func TestGroupClaimServerErrorInTheWrites(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t)
	var ws []*store.ClaimWrite
	claim := &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10}, Decide: func(l []store.Claimable) ([]*store.ClaimWrite, error) {
		ws = leaseAll(l, now, true)
		return ws, nil
	}}
	create := store.CreateParams{ID: "c", Status: workflow.StatusRunning, State: stepsState(map[string]workflow.StepStatus{"s": workflow.StepRunning})}
	if _, _, err := s.ApplyGroup(t.Context(), []store.CreateParams{create}, nil, claim); err == nil || len(ws) != 2 {
		t.Fatalf("ApplyGroup = %v with %d claim writes; want an error from the second", err, len(ws))
	}
	for _, w := range ws {
		if w.Written {
			t.Errorf("write of %s reported written", w.Tasks[0].InstanceID)
		}
	}
	if _, err := s.Get(t.Context(), "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the group's new instance after the failed group: %v, want ErrNotFound", err)
	}
	if a, err := s.Get(t.Context(), "a"); err != nil || a.Version != 0 {
		t.Errorf("instance a after the failed group: %v, %v; want version 0", a, err)
	}
	claimClean(t, s, store.TaskQueued, 2)
}
