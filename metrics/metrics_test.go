package metrics_test

import (
	"testing"

	"github.com/flowd/flowd/metrics"
)

// Every documented metric is scraped from the start, each op at 0:
// a dashboard or alert on a fresh server finds them.
func TestMetricsExistBeforeAnyWrite(t *testing.T) {
	m := metrics.New()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
	}
	for name, want := range map[string]int{
		"flowd_state_updates_total":     len(metrics.Ops) * len(metrics.Results),
		"flowd_update_duration_seconds": len(metrics.Ops),
		"flowd_update_retries_total":    1,
		"flowd_tasks_claimed_total":     1,
		"flowd_tasks_completed_total":   len(metrics.TaskResults),
		"flowd_lease_expirations_total": 1,
		"flowd_workflows_deleted_total": 1,
	} {
		if series[name] != want {
			t.Errorf("%s has %d series on a fresh registry, want %d", name, series[name], want)
		}
	}
}
