package sqlite

import (
	"testing"
	"time"

	"github.com/flowd/flowd/store/storetest"
)

// taskConcurrencyVersion is the migration that makes the LEASED counts
// of step concurrency keys rows.
const taskConcurrencyVersion = 19

// TestTaskConcurrencyMigrationCountsLeasedTasks: a database with LEASED
// tasks of step concurrency keys in flight gets their counts, and its
// claims and completions go on from them.
func TestTaskConcurrencyMigrationCountsLeasedTasks(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, taskConcurrencyVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", taskConcurrencyVersion-1, err)
	}
	if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
		VALUES ('run', '', 'RUNNING', '{}', '{}', 1, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMicro()
	for _, task := range storetest.LegacyLeasedTasks() {
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at, concurrency_key, concurrency_limit)
			VALUES (?1, 'run', ?1, 'q', ?2, 1, 3, ?5 - 60000000, CASE WHEN ?2 = 'LEASED' THEN 'lease-' || ?1 ELSE '' END, '',
				CASE WHEN ?2 = 'LEASED' THEN ?5 + 3600000000 END, '{}', ?5, ?5, NULLIF(?3, ''), ?4)`,
			task.ID, string(task.Status), task.Key, task.Limit, now); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	storetest.CheckLegacyLeased(t, s, harness().LeasedCounts(t, s))
}
