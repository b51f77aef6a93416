package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/workflow"
)

// queuedValues gathers flowd_workflows_queued by definition.
func queuedValues(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "flowd_workflows_queued" {
			continue
		}
		for _, mt := range f.GetMetric() {
			got[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
		}
	}
	return got
}

// flowd_workflows_queued{definition} counts the QUEUED instances of each
// definition as stored; QUEUED is also a status of flowd_workflows.
func TestQueuedGauge(t *testing.T) {
	ctx := context.Background()
	base := testkit.SQLite(t, "sqlite::memory:")
	m := metrics.New()
	s := observed.Wrap(base, nil, m)
	m.RegisterQueuedGauge(func(ctx context.Context) (map[string]int64, error) {
		c, err := s.CountInstances(ctx, store.CountParams{Queued: true})
		return c.Queued, err
	}, nil)
	m.RegisterWorkflowGauge(func(ctx context.Context) (map[workflow.Status]int64, error) {
		return store.CountByStatus(ctx, s)
	}, nil)
	if got := queuedValues(t, m); len(got) != 0 {
		t.Errorf("no queued instance: %v", got)
	}
	add := func(id, def string, status workflow.Status) {
		t.Helper()
		if _, err := s.Create(ctx, store.CreateParams{ID: id, Definition: def, Status: status,
			Concurrency: &store.ConcurrencySlot{Key: "k", Limit: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	add("r", "a", workflow.StatusRunning)
	for i := range 3 {
		add(fmt.Sprintf("qa%d", i), "a", workflow.StatusQueued)
	}
	add("qb", "b", workflow.StatusQueued)
	if got := queuedValues(t, m); len(got) != 2 || got["a"] != 3 || got["b"] != 1 {
		t.Errorf("flowd_workflows_queued = %v, want a=3 b=1", got)
	}
	families, _ := m.Registry.Gather()
	for _, f := range families {
		if f.GetName() != "flowd_workflows" {
			continue
		}
		for _, mt := range f.GetMetric() {
			if mt.GetLabel()[0].GetValue() == "QUEUED" && mt.GetGauge().GetValue() != 4 {
				t.Errorf("flowd_workflows{status=QUEUED} = %v, want 4", mt.GetGauge().GetValue())
			}
		}
	}
	// A failing count is an invalid metric, not a panic.
	m2 := metrics.New()
	m2.RegisterQueuedGauge(func(context.Context) (map[string]int64, error) { return nil, errors.New("down") }, nil)
	if _, err := m2.Registry.Gather(); err == nil {
		t.Error("a failing count gathered without error")
	}
}
