package sqlite

import (
	"testing"
)

// TestIterationsMigrationKeepsTasks: the rebuild of workflow_tasks that
// adds the iteration keeps every task row (as iteration 0, a plain step's
// task), and the step's uniqueness moves to (instance, step, iteration).
func TestIterationsMigrationKeepsTasks(t *testing.T) {
	t.Parallel()
	s := openStore(t, fileURL(t))
	ctx := t.Context()
	if err := s.migrateTo(ctx, historyPatchesVersion); err != nil {
		t.Fatalf("migrate to %d: %v", historyPatchesVersion, err)
	}
	for _, stmt := range []string{
		`INSERT INTO workflow_instances (id, status, state, input, version, created_at, updated_at) VALUES ('i', 'RUNNING', '{}', 'null', 0, 1, 1)`,
		`INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, max_attempts, run_at, input, created_at, updated_at)
		VALUES ('t', 'i', 'a', 'q', 'QUEUED', 3, 5, '{"x":1}', 1, 1)`,
	} {
		if _, err := s.writeDB.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	migrate(t, s)
	tk, err := s.Task(ctx, "t")
	if err != nil {
		t.Fatalf("Task after the migration: %v", err)
	}
	if tk.Iteration != 0 || tk.StepID != "a" || string(tk.Input) != `{"x":1}` || tk.MaxAttempts != 3 {
		t.Errorf("task after the migration = %+v", tk)
	}
	if _, err := s.writeDB.ExecContext(ctx, `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, max_attempts, run_at, input, created_at, updated_at, iteration)
		VALUES ('t1', 'i', 'a', 'q', 'QUEUED', 3, 5, 'null', 1, 1, 1)`); err != nil {
		t.Errorf("a second iteration of the step: %v", err)
	}
	tasks, err := s.TasksOfInstance(ctx, "i")
	if err != nil || len(tasks) != 2 || tasks[1].Iteration != 1 {
		t.Errorf("TasksOfInstance = %v, %v; want t and t1 (iteration 1)", tasks, err)
	}
}
