package postgres

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// iterationOutputsVersion is the migration that moves the outputs of
// foreach iterations onto their task rows.
const iterationOutputsVersion = 27

// TestIterationOutputsMigrationMovesOutputsToTheirRows: a foreach step in
// flight keeps the outputs of its completed iterations, on their rows.
func TestIterationOutputsMigrationMovesOutputsToTheirRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAt(t, iterationOutputsVersion-1)
	if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
		VALUES ('fanout', '', 'RUNNING', '{"steps":{},"variables":{}}', '{}', 1, now(), now())`); err != nil {
		t.Fatal(err)
	}
	record := storetest.LegacyForeachState[len(`{"steps":{"each":`):strings.LastIndex(storetest.LegacyForeachState, `},"variables"`)]
	if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_steps (instance_id, step_id, record) VALUES ('fanout', 'each', $1)`, record); err != nil {
		t.Fatal(err)
	}
	for i, task := range storetest.LegacyForeachTasks() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at, iteration)
			VALUES ($1, $2, 'each', $3, $4, 1, 3, now(), CASE WHEN $4 = 'LEASED' THEN 'lease-' || $1 ELSE '' END, '', CASE WHEN $4 = 'LEASED' THEN now() + interval '1 hour' END, '{}', now(), now(), $5)`,
			task.ID, task.InstanceID, task.Queue, string(task.Status), i+1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacyForeach(t, s)
}
