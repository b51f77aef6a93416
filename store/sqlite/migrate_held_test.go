package sqlite

import (
	"testing"
	"time"

	"github.com/flowd/flowd/store/storetest"
)

// heldTasksVersion is the migration that stores on each task whether its
// instance's status holds it.
const heldTasksVersion = 20

// TestHeldTasksMigrationKeepsPausedWorkflowsPaused: the active tasks of a
// PAUSED instance in flight are held after the migration (its sleep timer
// is not), and claimed once it is resumed.
func TestHeldTasksMigrationKeepsPausedWorkflowsPaused(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, heldTasksVersion-1); err != nil {
		t.Fatalf("migrate to %d: %v", heldTasksVersion-1, err)
	}
	insertLegacyInstances(t, s, storetest.LegacyHeldInstances())
	due := time.Now().Add(-time.Hour).UnixMicro()
	for _, task := range storetest.LegacyHeldTasks() {
		if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at)
			VALUES (?1, ?2, ?1, ?3, ?4, 1, 3, ?5, CASE WHEN ?4 = 'LEASED' THEN 'lease-' || ?1 ELSE '' END, '', CASE WHEN ?4 = 'LEASED' THEN 4000000000000000 END, '{}', 1, 1)`,
			task.ID, task.InstanceID, task.Queue, string(task.Status), due); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	storetest.CheckLegacyHeld(t, s)
}
