package observed_test

import (
	"testing"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/workflow"
)

// TestWrapTracesAndCounts: with a provider and metrics, one wrapper does
// both: the writes made inside a transaction count (and make no span of
// their own: the transaction's covers them), an operation outside one is
// a span and a count; the backend's notifications stay visible, and a
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
	err := s.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
		_, err := tx.Create(ctx, store.CreateParams{ID: "in-tx", Status: workflow.StatusRunning})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, store.CreateParams{ID: "alone", Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range exp.GetSpans() {
		names = append(names, sp.Name)
	}
	if len(names) != 2 || names[0] != "store.tx" || names[1] != "store.create" {
		t.Errorf("spans %v, want store.tx and store.create", names)
	}
	if got := stateUpdates(t, m, "create", metrics.ResultOK); got != 2 {
		t.Errorf("flowd_state_updates_total{op=create,result=ok} = %v, want 2", got)
	}
}
