package sqlite

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// runawayLimitsVersion is the migration that counts descendants.
const runawayLimitsVersion = 16

// TestRunawayLimitsMigrationCountsTreesInFlight: a database whose
// workflows have children in flight gets the counts of their trees.
func TestRunawayLimitsMigrationCountsTreesInFlight(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, runawayLimitsVersion-2); err != nil {
		t.Fatalf("migrate to %d: %v", runawayLimitsVersion-2, err)
	}
	for _, n := range storetest.LegacyTrees() {
		var parent any
		if n.Parent != "" {
			parent = n.Parent
		}
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at, parent_id, parent_step)
			VALUES (?1, ?2, '{}', '{}', 0, 1, 1, ?3, CASE WHEN ?3 IS NULL THEN NULL ELSE 's' END)`, n.ID, string(n.Status), parent); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	storetest.CheckLegacyTrees(t, s)
}
