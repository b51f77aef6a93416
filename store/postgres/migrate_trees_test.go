package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// runawayLimitsVersion is the migration that counts descendants.
const runawayLimitsVersion = 18

// TestRunawayLimitsMigrationCountsTreesInFlight: a database whose
// workflows have children in flight gets the counts of their trees.
func TestRunawayLimitsMigrationCountsTreesInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openMigratedTo(t, runawayLimitsVersion-2)
	for _, n := range storetest.LegacyTrees() {
		var parent any
		if n.Parent != "" {
			parent = n.Parent
		}
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at, parent_id, parent_step)
			VALUES ($1, $2, '{}', '{}', 0, now(), now(), $3::text, CASE WHEN $3::text IS NULL THEN NULL ELSE 's' END)`, n.ID, string(n.Status), parent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacyTrees(t, s)
}
