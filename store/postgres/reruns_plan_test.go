package postgres

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/store"
)

// The re-runs of an instance (GET /v1/workflows/{id} reads them on every
// read of an instance of a definition) are found through their partial
// index, newest first, however many instances there are: the query is
// List's with ListParams.RerunOf.
func TestRerunsOfUseTheirIndex(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	// 50,000 instances, 500 of them re-runs of 50 originals.
	for _, stmt := range []string{
		`INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at, rerun_of)
		SELECT format('w%s', i), 'd', 'COMPLETED', '{}', '{}', 0, now() - i * interval '1 second', now(),
			CASE WHEN i % 100 = 0 THEN format('w%s', (i / 100) % 50 + 1) END
		FROM generate_series(0, 49999) AS i`,
		`ANALYZE workflow_instances`,
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	sql := "SELECT " + instanceColumns + " FROM workflow_instances WHERE rerun_of = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
	custom, generic := explain(t, s, "", sql, "w1", 21)
	for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
		if !strings.Contains(plan, "workflow_instances_rerun_of_idx") || strings.Contains(plan, "Seq Scan on workflow_instances") {
			t.Errorf("%s plan of the re-runs of an instance:\n%s", kind, plan)
		}
	}
	page, err := s.List(ctx, store.ListParams{RerunOf: "w1"})
	if err != nil || len(page.Instances) != 10 {
		t.Fatalf("List of w1's re-runs: %d, %v", len(page.Instances), err)
	}
}
