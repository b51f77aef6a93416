package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// orphanTasksVersion is the migration that cancels the active tasks of
// instances that no longer run.
const orphanTasksVersion = 21

// TestOrphanTasksMigrationCancelsTasksOfStoppedInstances: the active tasks
// an earlier release left for its orphan sweep are cancelled; those of
// instances that run are not touched.
func TestOrphanTasksMigrationCancelsTasksOfStoppedInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openMigratedTo(t, orphanTasksVersion-1)
	for id, status := range storetest.LegacyOrphanInstances() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
			VALUES ($1, '', $2, '{}', '{}', 1, now(), now())`, id, string(status)); err != nil {
			t.Fatal(err)
		}
	}
	for _, task := range storetest.LegacyOrphanTasks() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at)
			VALUES ($1, $2, $1, 'q', $3, 1, 3, now(), CASE WHEN $3 = 'LEASED' THEN 'lease-' || $1 ELSE '' END, '', CASE WHEN $3 = 'LEASED' THEN now() + interval '1 hour' END, '{}', now(), now())`,
			task.ID, task.InstanceID, string(task.Status)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacyOrphans(t, s)
}
