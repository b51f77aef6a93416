package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// taskConcurrencyVersion is the migration that makes the LEASED counts
// of step concurrency keys rows.
const taskConcurrencyVersion = 22

// TestTaskConcurrencyMigrationCountsLeasedTasks: a database with LEASED
// tasks of step concurrency keys in flight gets their counts, and its
// claims and completions go on from them.
func TestTaskConcurrencyMigrationCountsLeasedTasks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAt(t, taskConcurrencyVersion-1)
	if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
		VALUES ('run', '', 'RUNNING', '{}', '{}', 1, now(), now())`); err != nil {
		t.Fatal(err)
	}
	for _, task := range storetest.LegacyLeasedTasks() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at, concurrency_key, concurrency_limit)
			VALUES ($1, 'run', $1, 'q', $2, 1, 3, now() - interval '1 minute', CASE WHEN $2 = 'LEASED' THEN 'lease-' || $1 ELSE '' END, '',
				CASE WHEN $2 = 'LEASED' THEN now() + interval '1 hour' END, '{}', now(), now(), NULLIF($3, ''), $4)`,
			task.ID, string(task.Status), task.Key, task.Limit); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacyLeased(t, s, harness().LeasedCounts(t, s))
}
