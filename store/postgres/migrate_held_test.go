package postgres

import (
	"testing"

	"github.com/flowd/flowd/store/storetest"
)

// heldTasksVersion is the migration that stores on each task whether its
// instance's status holds it.
const heldTasksVersion = 23

// TestHeldTasksMigrationKeepsPausedWorkflowsPaused: the active tasks of a
// PAUSED instance in flight are held after the migration (its sleep timer
// is not), and claimed once it is resumed.
func TestHeldTasksMigrationKeepsPausedWorkflowsPaused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAt(t, heldTasksVersion-1)
	insertLegacyInstances(t, s, storetest.LegacyHeldInstances())
	for _, task := range storetest.LegacyHeldTasks() {
		if _, err := s.pool.Exec(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, lease, lease_owner, lease_until, input, created_at, updated_at)
			VALUES ($1, $2, $1, $3, $4, 1, 3, now() - interval '1 hour', CASE WHEN $4 = 'LEASED' THEN 'lease-' || $1 ELSE '' END, '', CASE WHEN $4 = 'LEASED' THEN now() + interval '1 hour' END, '{}', now(), now())`,
			task.ID, task.InstanceID, task.Queue, string(task.Status)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLegacyHeld(t, s)
}
