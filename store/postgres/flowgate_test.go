package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// While another transaction holds a concurrency key's lock, a claim waits
// for it, and a group's claim (whose writes must wait for nobody) leaves
// the key's tasks queued at once.
func TestFlowGateKeyLocks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{Now: func() time.Time { return now }})
	ctx := t.Context()
	create(t, s, store.CreateParams{ID: "w", Status: workflow.StatusRunning})
	task := &store.Task{ID: "k0", InstanceID: "w", StepID: "a", Queue: "q", MaxAttempts: 1, RunAt: now,
		Flow: workflow.TaskFlow{ConcurrencyKey: "k", ConcurrencyLimit: 1}}
	if err := storetest.InsertTasks(ctx, s, []*store.Task{task}); err != nil {
		t.Fatal(err)
	}
	holder, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, flowLockID("concurrency", "k")); err != nil {
		t.Fatal(err)
	}
	var offered []string
	decide := func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		for _, c := range locked {
			offered = append(offered, c.Task.ID)
		}
		return nil, nil
	}
	var held store.HeldBack
	params := store.ClaimParams{Queues: []string{"q"}, Now: now, Limit: 10, OnHeldBack: func(h store.HeldBack) { held = h }}
	if _, _, err := s.ApplyGroup(ctx, nil, nil, &store.GroupClaim{Params: params, Decide: decide}); err != nil {
		t.Fatalf("group claim: %v", err)
	}
	if len(offered) != 0 || held.Concurrency != 1 {
		t.Errorf("a group's claim with the key's lock taken offered %v and held back %+v; want nothing offered, one held back", offered, held)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = s.ClaimTasks(wctx, params, decide)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a claim with the key's lock taken: %v, want it waiting until its context ends", err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, flowLockID("concurrency", "k")); err != nil {
		t.Fatal(err)
	}
	// The cancelled claim's connection was closed; its server process
	// releases the task's row lock when it notices, a moment later, and
	// SKIP LOCKED passes over the row until then.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		offered = nil
		err := s.ClaimTasks(ctx, params, decide)
		if err != nil || len(offered) == 1 || time.Now().After(deadline) {
			if err != nil || len(offered) != 1 {
				t.Errorf("once the lock is free: %v, offered %v; want k0", err, offered)
			}
			break
		}
	}
}
