package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
)

// TestStartWorkflowIdempotencyKey: a start with a used key starts nothing
// and names the first instance.
func TestStartWorkflowIdempotencyKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define("name: one\nsteps:\n  - {id: a, type: task, handler: h}\n")
		p := engine.StartParams{Definition: "one", IdempotencyKey: "k", RequestHash: "h1"}
		first, err := n.eng.StartWorkflow(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = n.eng.StartWorkflow(t.Context(), p)
		var ke *store.IdempotencyKeyError
		if !errors.As(err, &ke) || ke.WorkflowID != first.ID || !ke.SameRequest {
			t.Fatalf("second start = %v, want an *IdempotencyKeyError naming %s", err, first.ID)
		}
		page, err := n.st.List(t.Context(), store.ListParams{})
		if err != nil || len(page.Instances) != 1 {
			t.Fatalf("List = %d instances, %v; want 1", len(page.Instances), err)
		}
	})
}

// TestSweepDeletesExpiredIdempotencyKeys: the sweeper deletes the keys
// older than a day and keeps the others.
func TestSweepDeletesExpiredIdempotencyKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// The store writes at the clock's time, the engine sweeps at it.
		clock := &manualClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
		st := openWithClock(t, b, clock.Now)
		for _, key := range []string{"old1", "old2"} {
			if _, err := st.Create(t.Context(), store.CreateParams{IdempotencyKey: key, RequestHash: "h"}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(time.Hour)
		young, err := st.Create(t.Context(), store.CreateParams{IdempotencyKey: "young", RequestHash: "h"})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(store.IdempotencyKeyTTL - time.Minute)
		eng := pollingEngine(t, st, "node-a", clock)
		if err := eng.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		left, err := st.Prune(t.Context(), store.PruneParams{Kind: store.PruneIdempotencyKeys, Before: clock.Now().Add(-store.IdempotencyKeyTTL), Limit: 10})
		if n := left.Count; err != nil || n != 0 {
			t.Errorf("expired keys left after a sweep: %d, %v; want 0", n, err)
		}
		_, err = st.Create(t.Context(), store.CreateParams{IdempotencyKey: "young", RequestHash: "h"})
		var ke *store.IdempotencyKeyError
		if !errors.As(err, &ke) || ke.WorkflowID != young.ID {
			t.Errorf("the young key after a sweep: %v, want it still naming %s", err, young.ID)
		}
	})
}

// openWithClock opens a migrated store of backend b on a fresh database,
// writing its timestamps at now.
func openWithClock(t *testing.T, b backend, now func() time.Time) store.Backend {
	t.Helper()
	addr := b.newDB(t)
	var st store.Backend
	var err error
	if b.name == "postgres" {
		st, err = postgres.Open(context.Background(), addr, postgres.Options{Now: now})
	} else {
		st, err = sqlite.Open(context.Background(), addr, sqlite.Options{Now: now})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}
