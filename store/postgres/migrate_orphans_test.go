package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// insertLegacyInstances inserts free-form instances in these statuses, by
// id, at version 1, as an earlier release left them.
func insertLegacyInstances(t *testing.T, s *Store, instances map[string]workflow.Status) {
	t.Helper()
	for id, status := range instances {
		if _, err := s.pool.Exec(t.Context(), `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
			VALUES ($1, '', $2, '{}', '{}', 1, now(), now())`, id, string(status)); err != nil {
			t.Fatal(err)
		}
	}
}

// orphanTasksVersion is the migration that cancels the active tasks of
// instances that no longer run.
const orphanTasksVersion = 21

// TestOrphanTasksMigrationCancelsTasksOfStoppedInstances: the active tasks
// an earlier release left for its orphan sweep are cancelled; those of
// instances that run are not touched.
func TestOrphanTasksMigrationCancelsTasksOfStoppedInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAt(t, orphanTasksVersion-1)
	insertLegacyInstances(t, s, storetest.LegacyOrphanInstances())
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
