package postgres

import (
	"strings"
	"testing"
	"time"
)

// The retention sweep finds expired instances through the partial index of
// finished instances, bounded by the latest cutoff, and their history and
// tasks through the instance id's indexes, in the custom and the generic
// plan: never a scan of a whole table.
func TestDeleteFinishedUsesIndexes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{Now: func() time.Time { return now }})
	taskFixture(t, s, now)
	if _, err := s.pool.Exec(t.Context(), `ANALYZE workflow_history`); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(-time.Hour)
	custom, generic := explain(t, s, "", expiredFinishedSQL,
		cutoff, []string{"audit", "noisy"}, []*time.Time{nil, &now}, now, 1000)
	for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
		if !strings.Contains(plan, "workflow_instances_finished_updated_at_idx") {
			t.Errorf("%s plan does not use workflow_instances_finished_updated_at_idx:\n%s", kind, plan)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s plan scans a table:\n%s", kind, plan)
		}
		t.Logf("%s plan:\n%s", kind, plan)
	}
}
