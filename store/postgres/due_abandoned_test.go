package postgres

import (
	"strings"
	"testing"
)

// The sweep's read of abandoned children reads the children that still
// run through their partial index, and looks up their parents by primary
// key: finished instances, however many, are never read. Its columns are
// the instance's, as scanInstance reads them.
func TestDueAbandonedUsesItsIndex(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	if want := instanceColumnsOf("c"); !strings.Contains(dueAbandonedSQL, want) || !strings.Contains(want, stateOf("c")) {
		t.Errorf("dueAbandonedSQL does not select %s:\n%s", want, dueAbandonedSQL)
	}
	// 2,000 top-level workflows, 20,000 finished children, 20 running.
	for _, stmt := range []string{
		`INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at)
		SELECT format('p%s', i), CASE WHEN i % 2 = 0 THEN 'CANCELLED' ELSE 'RUNNING' END, '{}', '{}', 0, now(), now()
		FROM generate_series(0, 1999) AS i`,
		`INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at, parent_id, parent_step)
		SELECT format('c%s', i), CASE WHEN i < 20 THEN 'RUNNING' ELSE 'COMPLETED' END, '{}', '{}', 0, now(), now(), format('p%s', i % 2000), 's'
		FROM generate_series(0, 19999) AS i`,
		`ANALYZE workflow_instances`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	custom, generic := explain(t, s, "", dueAbandonedSQL, 200)
	for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
		if !strings.Contains(plan, "workflow_instances_abandoned_idx") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s plan of Due(abandoned):\n%s", kind, plan)
		}
		t.Logf("%s plan:\n%s", kind, plan)
	}
}
