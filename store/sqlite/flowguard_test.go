package sqlite

import (
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// TestClaimFlowGuardMiss: a claim whose guarded write of its key's LEASED
// count changes no row (here a trigger makes the store's update of the
// row a no-op, as a count moved by another writer would) leases nothing
// and fails with ErrFlowMiss; a group's claim is left out — nothing
// claimed, nothing reported held back — and the group's write is made.
func TestClaimFlowGuardMiss(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		s := openMigrated(t)
		ctx := t.Context()
		now := time.Now()
		for _, id := range []string{"w", "other"} {
			if _, err := s.Create(ctx, store.CreateParams{ID: id, Status: workflow.StatusRunning}); err != nil {
				t.Fatal(err)
			}
		}
		task := &store.Task{ID: "t0", InstanceID: "w", StepID: "a", Queue: "q", MaxAttempts: 1, RunAt: now.Add(-time.Minute),
			Flow: workflow.TaskFlow{ConcurrencyKey: "k", ConcurrencyLimit: 5}}
		if err := storetest.InsertTasks(ctx, s, []*store.Task{task}); err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{
			`INSERT INTO task_concurrency (key, leased) VALUES ('k', 0)`,
			`CREATE TRIGGER miss BEFORE UPDATE ON task_concurrency BEGIN SELECT RAISE(IGNORE); END`,
		} {
			if _, err := s.writeDB.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		other, err := s.Get(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		var held []store.HeldBack
		p := store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10, Owner: "me", Lease: time.Minute,
			OnHeldBack: func(h store.HeldBack) { held = append(held, h) }}
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
		} else {
			claimed, err := s.ClaimTasks(ctx, p)
			if !errors.Is(err, store.ErrFlowMiss) || len(claimed) != 0 {
				t.Errorf("ClaimTasks = %d tasks, %v; want ErrFlowMiss", len(claimed), err)
			}
		}
		if got, err := s.Task(ctx, "t0"); err != nil || got.Status != store.TaskQueued {
			t.Errorf("t0 after the claim missed (group %v): %+v, %v; want QUEUED", group, got, err)
		}
		if len(held) != 0 {
			t.Errorf("a claim left out reported %+v held back", held)
		}
	}
}
