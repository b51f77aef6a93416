package observed_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// flowd_workflows_deleted_total counts every stored delete: DeleteInstance
// (the DELETE route) outside and inside a committed transaction, and each
// instance of a Prune of instances (the retention sweep); a refused
// delete and one rolled back count nothing.
func TestWorkflowsDeletedCounts(t *testing.T) {
	ctx := t.Context()
	m := metrics.New()
	s := observed.Wrap(openSQLite(t), nil, m)
	for i := range 6 {
		id := fmt.Sprintf("w%d", i)
		if _, err := s.Create(ctx, store.CreateParams{ID: id, Status: workflow.StatusRunning}); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Transition(ctx, s, store.TransitionParams{ID: id, From: workflow.StatusRunning, To: workflow.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, store.CreateParams{ID: "live", Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	deleted := func() float64 { t.Helper(); return counterValue(t, m, "flowd_workflows_deleted_total") }

	if err := s.DeleteInstance(ctx, "live", nil); !errors.Is(err, store.ErrNotTerminal) {
		t.Fatalf("DeleteInstance(live) = %v, want ErrNotTerminal", err)
	}
	if err := s.DeleteInstance(ctx, "w0", nil); err != nil {
		t.Fatal(err)
	}
	if got := deleted(); got != 1 {
		t.Errorf("after one delete and one refused: %v, want 1", got)
	}
	if err := s.DeleteInstance(ctx, "w1", nil); err != nil {
		t.Fatal(err)
	}
	if got := deleted(); got != 2 {
		t.Errorf("after a second delete: %v, want 2", got)
	}
	pruned, err := s.Prune(ctx, store.PruneParams{Kind: store.PruneInstances, Before: time.Now().Add(time.Hour), Limit: 3})
	if ids := pruned.IDs; err != nil || len(ids) != 3 {
		t.Fatalf("Prune(instances) = %v, %v; want 3 ids", ids, err)
	}
	if got := deleted(); got != 5 {
		t.Errorf("after a batch of 3: %v, want 5", got)
	}
}

// counterValue reads the counter name (without labels) from the registry.
func counterValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
