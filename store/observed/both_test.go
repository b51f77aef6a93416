package observed_test

import (
	"testing"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/workflow"
)

// TestWrapTracesAndCounts: with a provider and metrics, one wrapper does
// both: an operation is a span and its writes count (ApplyEach's each
// write made); the backend's notifications stay visible, and a
// metrics-only wrapper does not invent them.
func TestWrapTracesAndCounts(t *testing.T) {
	t.Parallel()
	base := openSQLite(t)
	if _, ok := observed.Wrap(&fakeBackend{}, nil, metrics.New()).(store.Listener); ok {
		t.Error("a store that cannot Listen appears to through a metrics-only wrapper")
	}
	if _, ok := observed.Wrap(listeningBackend{&fakeBackend{}}, nil, metrics.New()).(store.Listener); !ok {
		t.Error("a metrics-only wrapper hides the backend's Listen")
	}
	tp, exp := newProvider(t)
	m := metrics.New()
	s := observed.Wrap(base, tp, m)
	ctx := t.Context()
	inst, err := s.Create(ctx, store.CreateParams{ID: "alone", Status: workflow.StatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	pause := &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: workflow.StatusPaused, State: inst.State, Cause: "pause"}
	stale := *pause
	stale.ID, stale.ExpectedVersion = "missing", 0
	if written, err := s.ApplyEach(ctx, []*store.Write{pause, &stale}); err != nil || written[0] == nil || written[1] != nil {
		t.Fatalf("ApplyEach = %v, %v; want the first written", written, err)
	}
	var names []string
	for _, sp := range exp.GetSpans() {
		names = append(names, sp.Name)
	}
	if len(names) != 2 || names[0] != "store.create" || names[1] != "store.apply_each" {
		t.Errorf("spans %v, want store.create and store.apply_each", names)
	}
	if got := stateUpdates(t, m, "apply", metrics.ResultOK); got != 1 {
		t.Errorf("flowd_state_updates_total{op=apply,result=ok} = %v, want 1 (the write made; the missed one writes nothing)", got)
	}
	if got := stateUpdates(t, m, "create", metrics.ResultOK); got != 1 {
		t.Errorf("flowd_state_updates_total{op=create,result=ok} = %v, want 1", got)
	}
}
