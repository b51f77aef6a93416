package observed_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

// Every write the engine makes is counted under its op, with its result,
// also inside a transaction.
func TestWrapCountsWrites(t *testing.T) {
	ctx := context.Background()
	base := openSQLite(t)
	m := metrics.New()
	s := observed.Wrap(base, nil, m)
	if _, err := s.Create(ctx, store.CreateParams{ID: "w", Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	// A completion of a task that does not exist: a conflict, nothing
	// written.
	completion := func(task string) *store.Write {
		return &store.Write{ID: "w", From: workflow.StatusRunning, Status: workflow.StatusRunning, Now: time.Now(),
			Update: []store.TaskWrite{{Task: &store.Task{ID: task, InstanceID: "w", StepID: "a", Queue: "q", Status: store.TaskDone, MaxAttempts: 1},
				Guard: store.TaskGuard{Status: store.TaskLeased, Attempt: 1, Lease: "l", LeaseUntil: time.Now()}}}}
	}
	if _, err := s.Apply(ctx, completion("t")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply = %v, want a conflict", err)
	}
	// A group counts each of its writes under its op.
	eq := s.(store.TaskQuerier)
	if _, _, err := eq.ApplyGroup(ctx, []store.CreateParams{{ID: "g"}}, []*store.Write{completion("t"), completion("t2")}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ApplyGroup = %v, want a conflict", err)
	}
	// A claim writes no instance: neither a claim that leases nor a
	// refused one is a state update.
	w, err := s.Get(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Apply(ctx, &store.Write{ID: "w", ExpectedVersion: w.Version, From: w.Status, Status: w.Status, State: w.State,
		Cause: "schedule c", Insert: []*store.Task{{ID: "t3", InstanceID: "w", StepID: "c", Queue: "q", MaxAttempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	claim := store.ClaimParams{Queues: []string{"q"}, Now: time.Now().Add(time.Second), Limit: 1, Owner: "node", Lease: time.Minute}
	if claimed, _, err := eq.ClaimTasks(ctx, claim); err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimTasks = %d tasks, %v; want t3", len(claimed), err)
	}
	claim.Limit = 0
	if _, _, err := eq.ClaimTasks(ctx, claim); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("ClaimTasks(limit 0) = %v, want ErrInvalidArgument", err)
	}
	for _, c := range []struct {
		op, result string
		want       float64
	}{{"create", metrics.ResultOK, 1}, {"apply", metrics.ResultConflict, 3}, {"create", metrics.ResultConflict, 1}, {"apply", metrics.ResultOK, 1}} {
		if got := stateUpdates(t, m, c.op, c.result); got != c.want {
			t.Errorf("flowd_state_updates_total{op=%q,result=%q} = %v, want %v", c.op, c.result, got, c.want)
		}
	}
	for op := range gatherOps(t, m) {
		if op == "claim" {
			t.Error("flowd_state_updates_total has a claim op: a claim writes no instance")
		}
	}
}

// stateUpdates reads flowd_state_updates_total{op, result} from the registry.
func stateUpdates(t *testing.T, m *metrics.Metrics, op, result string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "flowd_state_updates_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["result"] == result {
				return metric.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The ops the observed store records are those pre-created (metrics.Ops).
func TestRecordedOpsAreKnown(t *testing.T) {
	m := metrics.New()
	before := len(gatherOps(t, m))
	ctx := context.Background()
	base := openSQLite(t)
	s := observed.Wrap(base, nil, m)
	inst, err := s.Create(ctx, store.CreateParams{ID: "w", Status: workflow.StatusRunning, State: workflow.State{Steps: map[string]*workflow.StepState{"a": {Status: workflow.StepWaiting}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Apply(ctx, &store.Write{ID: "w", ExpectedVersion: inst.Version, From: inst.Status, Status: workflow.StatusPaused, State: inst.State, Cause: "test"})
	if got := gatherOps(t, m); len(got) != before {
		t.Errorf("ops recorded: %v; %d were pre-created (metrics.Ops = %v)", got, before, metrics.Ops)
	}
	for op, n := range map[string]float64{"create": 1, "apply": 1} {
		if got := stateUpdates(t, m, op, metrics.ResultOK); got != n {
			t.Errorf("flowd_state_updates_total{op=%q,result=\"ok\"} = %v, want %v", op, got, n)
		}
	}
}

// gatherOps returns the op labels of flowd_state_updates_total.
func gatherOps(t *testing.T, m *metrics.Metrics) map[string]bool {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "flowd_state_updates_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "op" {
					ops[l.GetValue()] = true
				}
			}
		}
	}
	return ops
}

// openSQLite opens a migrated in-memory SQLite store, closed with the test.
func openSQLite(t *testing.T) store.Backend {
	t.Helper()
	return openSQLiteAt(t, "sqlite::memory:")
}

// openSQLiteAt opens and migrates the SQLite database at url.
func openSQLiteAt(t *testing.T, url string) *sqlite.Store {
	t.Helper()
	return testkit.SQLite(t, url)
}
