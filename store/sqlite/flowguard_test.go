package sqlite

import (
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// heldBackSetup opens a store with the RUNNING instances w and other, w's
// tasks t0 and t1 due on queue q under concurrency key k with limit, and
// then runs stmts on it. It returns the store, the time to claim at and
// other as stored.
func heldBackSetup(t *testing.T, limit int, stmts ...string) (*Store, time.Time, *workflow.Instance) {
	t.Helper()
	s := openMigrated(t)
	ctx := t.Context()
	now := time.Now()
	for _, id := range []string{"w", "other"} {
		if _, err := s.Create(ctx, store.CreateParams{ID: id, Status: workflow.StatusRunning}); err != nil {
			t.Fatal(err)
		}
	}
	if err := storetest.InsertTasks(ctx, s, storetest.TasksUnderKey("w", "k", limit, now, "t0", "t1")); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range stmts {
		if _, err := s.writeDB.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	other, err := s.Get(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	return s, now, other
}

// TestClaimFlowGuardMiss: a claim whose guarded write of its key's LEASED
// count changes no row (here a trigger makes the store's update of the
// row a no-op, as a count moved by another writer would) leases nothing
// and fails with ErrFlowMiss; a group's claim is left out — nothing
// claimed — and the group's write is made. Neither reports the task its
// key held back: what the claim read has moved on.
func TestClaimFlowGuardMiss(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		// One slot of k is free: t0 is kept, t1 held back.
		s, now, other := heldBackSetup(t, 5,
			`INSERT INTO task_concurrency (key, leased) VALUES ('k', 4)`,
			`CREATE TRIGGER miss BEFORE UPDATE ON task_concurrency BEGIN SELECT RAISE(IGNORE); END`)
		ctx := t.Context()
		var held store.HeldBack
		p := store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10, Owner: "me", Lease: time.Minute}
		if group {
			claim := &store.GroupClaim{Params: p}
			_, _, err := s.ApplyGroup(ctx, nil, []*store.Write{{ID: "other", ExpectedVersion: other.Version, From: other.Status,
				Status: other.Status, State: other.State, Cause: "group write"}}, claim)
			if err != nil || len(claim.Claimed) != 0 {
				t.Errorf("a group whose claim missed = %v, claimed %d; want it committed, nothing claimed", err, len(claim.Claimed))
			}
			if after, err := s.Get(ctx, "other"); err != nil || after.Version != other.Version+1 {
				t.Errorf("the group's write: %+v, %v; want version %d", after, err, other.Version+1)
			}
			held = claim.HeldBack
		} else {
			claimed, h, err := s.ClaimTasks(ctx, p)
			held = h
			if !errors.Is(err, store.ErrFlowMiss) || len(claimed) != 0 {
				t.Errorf("ClaimTasks = %d tasks, %v; want ErrFlowMiss", len(claimed), err)
			}
		}
		for _, id := range []string{"t0", "t1"} {
			if got, err := s.Task(ctx, id); err != nil || got.Status != store.TaskQueued {
				t.Errorf("%s after the claim missed (group %v): %+v, %v; want QUEUED", id, group, got, err)
			}
		}
		if held.Any() {
			t.Errorf("a claim left out reported %+v held back", held)
		}
	}
}

// TestClaimRolledBackReportsNothing: a claim whose transaction fails at
// COMMIT (here a deferred foreign key that a trigger on the leases
// breaks) leases nothing and reports nothing held back, although its
// decision held a task back: only a committed claim is reported. A
// group's claim fails with the group, whose write is not made either.
func TestClaimRolledBackReportsNothing(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		// k has one slot: t0 is leased, t1 held back.
		s, now, other := heldBackSetup(t, 1,
			`CREATE TABLE refused (id TEXT PRIMARY KEY)`,
			`CREATE TABLE dangling (ref TEXT REFERENCES refused (id) DEFERRABLE INITIALLY DEFERRED)`,
			`CREATE TRIGGER fail_at_commit AFTER UPDATE ON workflow_tasks BEGIN INSERT INTO dangling VALUES ('none'); END`)
		ctx := t.Context()
		var err error
		p := store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10, Owner: "me", Lease: time.Minute}
		var held store.HeldBack
		if group {
			claim := &store.GroupClaim{Params: p}
			_, _, err = s.ApplyGroup(ctx, nil, []*store.Write{{ID: "other", ExpectedVersion: other.Version, From: other.Status,
				Status: other.Status, State: other.State, Cause: "group write"}}, claim)
			held = claim.HeldBack
			if len(claim.Claimed) != 0 {
				t.Errorf("a group that failed at COMMIT claimed %d tasks", len(claim.Claimed))
			}
		} else {
			_, held, err = s.ClaimTasks(ctx, p)
		}
		if err == nil {
			t.Fatalf("a claim whose COMMIT failed (group %v) succeeded", group)
		}
		if held.Any() {
			t.Errorf("a claim whose COMMIT failed (group %v) reported %+v held back", group, held)
		}
		for _, id := range []string{"t0", "t1"} {
			if got, err := s.Task(ctx, id); err != nil || got.Status != store.TaskQueued {
				t.Errorf("%s after the claim failed (group %v): %+v, %v; want QUEUED", id, group, got, err)
			}
		}
		if after, err := s.Get(ctx, "other"); err != nil || after.Version != other.Version {
			t.Errorf("other after the group failed: %+v, %v; want version %d", after, err, other.Version)
		}
	}
}
