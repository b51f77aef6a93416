package sqlite

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// iterationOutputsVersion is the migration that moves the outputs of
// foreach iterations onto their task rows.
const iterationOutputsVersion = 24

// TestIterationOutputsMigrationMovesOutputsToTheirRows: a foreach step in
// flight keeps the outputs of its completed iterations, on their rows.
func TestIterationOutputsMigrationMovesOutputsToTheirRows(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, iterationOutputsVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", iterationOutputsVersion-1, err)
	}
	if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
		VALUES ('fanout', '', 'RUNNING', '{"steps":{},"variables":{}}', '{}', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	record := storetest.LegacyForeachState[len(`{"steps":{"each":`):strings.LastIndex(storetest.LegacyForeachState, `},"variables"`)]
	if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_steps (instance_id, step_id, record) VALUES ('fanout', 'each', ?1)`, record); err != nil {
		t.Fatal(err)
	}
	for i, task := range storetest.LegacyForeachTasks() {
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at, iteration)
			VALUES (?1, ?2, 'each', ?3, ?4, 1, 3, 1, CASE WHEN ?4 = 'LEASED' THEN 'lease-' || ?1 ELSE '' END, '', CASE WHEN ?4 = 'LEASED' THEN 4000000000000000 END, '{}', 1, 1, ?5)`,
			task.ID, task.InstanceID, task.Queue, string(task.Status), i+1); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	storetest.CheckLegacyForeach(t, s)
}
