package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ClaimTasks on the store runs its transaction over two pipelined batches on
// one connection. These tests break it inside the second batch and check
// that nothing is half written, no session stays in a transaction, no
// connection stays acquired and nothing stays locked.

// claimFixture: RUNNING instances a and b with one queued task each (ta, tb).
func claimFixture(t *testing.T, flow workflow.TaskFlow) (*Store, time.Time) {
	t.Helper()
	s, _ := setup(t, Options{})
	now := time.Now().UTC()
	for _, id := range []string{"a", "b"} {
		create(t, s, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepsState(map[string]workflow.StepStatus{"s": workflow.StepRunning}),
			Tasks: []*store.Task{{ID: "t" + id, InstanceID: id, StepID: "s", Queue: "q", MaxAttempts: 1, RunAt: now.Add(-time.Second), Flow: flow}}})
	}
	return s, now
}

// claimParams claims up to 10 tasks of queue q at now for "me".
func claimParams(now time.Time) store.ClaimParams {
	return store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10, Owner: "me", Lease: time.Minute}
}

// failLeaseOf makes the server refuse the lease of task id (an error
// raised by a trigger when its row is updated), after the leases of the
// tasks before it in the same statement were written.
func failLeaseOf(t *testing.T, s *Store, id string) {
	t.Helper()
	for _, sql := range []string{
		`CREATE FUNCTION refuse_lease() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'lease refused' USING ERRCODE = '22023'; END $$`,
		`CREATE TRIGGER refuse_lease BEFORE UPDATE ON workflow_tasks FOR EACH ROW
		WHEN (NEW.id = '` + id + `' AND NEW.status = 'LEASED') EXECUTE FUNCTION refuse_lease()`,
	} {
		if _, err := s.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
}

// claimClean checks that no session is idle in a transaction, no
// connection is acquired, both tasks have status want, and a new claim
// leases claimable tasks (nothing is left locked).
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
	if _, err := s.pool.Exec(t.Context(), `DROP TRIGGER IF EXISTS refuse_lease ON workflow_tasks`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	claimed, _, err := s.ClaimTasks(ctx, claimParams(time.Now()))
	if err != nil || len(claimed) != claimable {
		t.Errorf("a later claim leased %d tasks (%v), want %d", len(claimed), err, claimable)
	}
}

// A lease that fails on the server after another was written rolls the
// whole claim back; COMMIT is never run.
func TestClaimTasksServerErrorInTheWrites(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t, workflow.TaskFlow{})
	failLeaseOf(t, s, "tb")
	claimed, _, err := s.ClaimTasks(t.Context(), claimParams(now))
	if err == nil || !strings.Contains(err.Error(), "lease refused") || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("ClaimTasks = %v, want the server's refusal of tb's lease", err)
	}
	if len(claimed) != 0 {
		t.Errorf("the failed claim returned %d tasks", len(claimed))
	}
	claimClean(t, s, store.TaskQueued, 2)
}

// Once its leases are sent, a claim is finished even if its context ends
// while they wait for a lock (here the guarded write of its key's LEASED
// count, held by another transaction): otherwise a commit whose answer
// was lost would leave the tasks leased to a caller that does not know it.
func TestClaimTasksFinishesOnceSent(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t, workflow.TaskFlow{ConcurrencyKey: "k", ConcurrencyLimit: 5})
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO task_concurrency (key, leased) VALUES ('k', 0)`); err != nil {
		t.Fatal(err)
	}
	blocker, err := s.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.WithoutCancel(t.Context())) }()
	if _, err := blocker.Exec(t.Context(), `SELECT 1 FROM task_concurrency WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var claimed []store.Claimable
	done := make(chan error, 1)
	go func() {
		var err error
		claimed, _, err = s.ClaimTasks(ctx, claimParams(now))
		done <- err
	}()
	waitForLockWaiter(t, s, done)
	cancel()
	time.Sleep(100 * time.Millisecond) // the cancellation has had its chance
	if err := blocker.Rollback(context.WithoutCancel(t.Context())); err != nil {
		t.Fatalf("releasing the key's row: %v", err)
	}
	if err := <-done; err != nil || len(claimed) != 2 {
		t.Fatalf("ClaimTasks = %d tasks, %v; want both leased, the sent claim finished", len(claimed), err)
	}
	claimClean(t, s, store.TaskLeased, 0)
}

// A lease that fails on the server rolls back the whole group: its
// creates and the claim's other leases.
func TestGroupClaimServerErrorInTheWrites(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t, workflow.TaskFlow{})
	failLeaseOf(t, s, "tb")
	claim := &store.GroupClaim{Params: claimParams(now)}
	create := store.CreateParams{ID: "c", Status: workflow.StatusRunning, State: stepsState(map[string]workflow.StepStatus{"s": workflow.StepRunning})}
	if _, _, err := s.ApplyGroup(t.Context(), []store.CreateParams{create}, nil, claim); err == nil || !strings.Contains(err.Error(), "lease refused") {
		t.Fatalf("ApplyGroup = %v; want the server's refusal of tb's lease", err)
	}
	if len(claim.Claimed) != 0 {
		t.Errorf("the failed group reported %d tasks claimed", len(claim.Claimed))
	}
	if _, err := s.Get(t.Context(), "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the group's new instance after the failed group: %v, want ErrNotFound", err)
	}
	claimClean(t, s, store.TaskQueued, 2)
}

// An owner PostgreSQL cannot store as text (a NUL, bytes that are not
// UTF-8) is refused before anything is sent, by a claim and by a group's
// claim (whose group is then not written either).
func TestClaimRefusesOwnerNotText(t *testing.T) {
	t.Parallel()
	s, now := claimFixture(t, workflow.TaskFlow{})
	const msg = "the lease owner is not valid UTF-8 text without NUL characters"
	for _, owner := range []string{"a\x00b", "\xff"} {
		p := claimParams(now)
		p.Owner = owner
		_, _, err := s.ClaimTasks(t.Context(), p)
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ClaimTasks with owner %q = %v, want ErrInvalidArgument saying %q", owner, err, msg)
		}
		create := store.CreateParams{ID: "c", Status: workflow.StatusRunning}
		_, _, err = s.ApplyGroup(t.Context(), []store.CreateParams{create}, nil, &store.GroupClaim{Params: p})
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ApplyGroup with a claim for owner %q = %v, want ErrInvalidArgument saying %q", owner, err, msg)
		}
		if _, err := s.Get(t.Context(), "c"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused group's instance: %v, want ErrNotFound", err)
		}
	}
	claimClean(t, s, store.TaskQueued, 2)
}
