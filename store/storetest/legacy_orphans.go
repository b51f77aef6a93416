package storetest

import (
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LegacyOrphanTask is an active task as a database from before every stop
// cancelled its instance's tasks may hold it: the stores' migration tests
// insert LegacyOrphanInstances and these rows before migrating, then check
// them with CheckLegacyOrphans.
type LegacyOrphanTask struct {
	ID, InstanceID string
	Status         store.TaskStatus
	// Want is the status after the migration.
	Want store.TaskStatus
}

// LegacyOrphanInstances are the instances of LegacyOrphanTasks, by id:
// two that still run (RUNNING, PAUSED) and three that stopped.
func LegacyOrphanInstances() map[string]workflow.Status {
	return map[string]workflow.Status{
		"run": workflow.StatusRunning, "paused": workflow.StatusPaused,
		"cancelled": workflow.StatusCancelled, "failed": workflow.StatusFailed, "done": workflow.StatusCompleted,
	}
}

// LegacyOrphanTasks are active tasks of instances that run, which stay as
// they are, and of instances that stopped, which the migration cancels,
// and a finished task, which it leaves alone.
func LegacyOrphanTasks() []LegacyOrphanTask {
	return []LegacyOrphanTask{
		{"run-q", "run", store.TaskQueued, store.TaskQueued},
		{"run-l", "run", store.TaskLeased, store.TaskLeased},
		{"paused-q", "paused", store.TaskQueued, store.TaskQueued},
		{"cancelled-q", "cancelled", store.TaskQueued, store.TaskCancelled},
		{"cancelled-l", "cancelled", store.TaskLeased, store.TaskCancelled},
		{"failed-q", "failed", store.TaskQueued, store.TaskCancelled},
		{"done-d", "done", store.TaskDone, store.TaskDone},
	}
}

// CheckLegacyOrphans checks, through s, that every LegacyOrphanTasks row
// has its Want status and that a cancelled one holds no lease.
func CheckLegacyOrphans(t *testing.T, s store.Querier) {
	t.Helper()
	rows := map[string]*store.Task{}
	for id := range LegacyOrphanInstances() {
		tasks, err := s.TasksOfInstance(t.Context(), id)
		if err != nil {
			t.Fatalf("tasks of %s: %v", id, err)
		}
		for _, task := range tasks {
			rows[task.ID] = task
		}
	}
	for _, want := range LegacyOrphanTasks() {
		got := rows[want.ID]
		switch {
		case got == nil:
			t.Errorf("task %s is gone after the migration", want.ID)
		case got.Status != want.Want:
			t.Errorf("task %s of a %s instance is %s after the migration, want %s", want.ID, LegacyOrphanInstances()[want.InstanceID], got.Status, want.Want)
		case want.Want == store.TaskCancelled && (got.Lease != "" || !got.LeaseUntil.IsZero()):
			t.Errorf("cancelled task %s still holds lease %q until %v", want.ID, got.Lease, got.LeaseUntil)
		}
	}
}
