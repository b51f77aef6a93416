package sqlite

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
		if _, err := s.writeDB.ExecContext(t.Context(), `INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
			VALUES (?1, '', ?2, '{}', '{}', 1, 1, 1)`, id, string(status)); err != nil {
			t.Fatal(err)
		}
	}
}

// orphanTasksVersion is the migration that cancels the active tasks of
// instances that no longer run.
const orphanTasksVersion = 18

// TestOrphanTasksMigrationCancelsTasksOfStoppedInstances: the active tasks
// an earlier release left for its orphan sweep are cancelled; those of
// instances that run are not touched.
func TestOrphanTasksMigrationCancelsTasksOfStoppedInstances(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, orphanTasksVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", orphanTasksVersion-1, err)
	}
	insertLegacyInstances(t, s, storetest.LegacyOrphanInstances())
	for _, task := range storetest.LegacyOrphanTasks() {
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at)
			VALUES (?1, ?2, ?1, 'q', ?3, 1, 3, 1, CASE WHEN ?3 = 'LEASED' THEN 'lease-' || ?1 ELSE '' END, '', CASE WHEN ?3 = 'LEASED' THEN 4000000000000000 END, '{}', 1, 1)`,
			task.ID, task.InstanceID, string(task.Status)); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	storetest.CheckLegacyOrphans(t, s)
}
