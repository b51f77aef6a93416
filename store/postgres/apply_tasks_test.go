package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// A tasks-only write guarded by its instance's status (an orphan's cancel)
// that waits for a task row another transaction is writing must see the
// status that transaction commits, not the one of its own snapshot: when a
// retry makes the instance RUNNING again and keeps the task queued, the
// cancel misses and the task stays runnable.
func TestTasksOnlyStatusGuardSeesCommittedRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{Now: func() time.Time { return now }})
	ctx := t.Context()
	inst := create(t, s, store.CreateParams{ID: "w", Status: workflow.StatusRunning,
		Tasks: []*store.Task{{StepID: "a", Queue: "q", MaxAttempts: 3, RunAt: now}}})
	failed, err := storetest.Transition(ctx, s, store.TransitionParams{ID: inst.ID, From: workflow.StatusRunning, To: workflow.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := s.TasksOfInstance(ctx, inst.ID)
	if err != nil || len(queued) != 1 {
		t.Fatalf("TasksOfInstance = %v, %v", queued, err)
	}
	task := queued[0]

	// The orphan's cancel, decided on FAILED.
	cancelled := *task
	cancelled.Status = store.TaskCancelled
	orphan := &store.Write{ID: inst.ID, TasksOnly: true, From: workflow.StatusFailed, Now: now,
		Update: []store.TaskWrite{{Task: &cancelled, Guard: store.GuardOf(task)}}}

	done := make(chan error, 1)
	err = s.querier.runTx(ctx, pgx.ReadCommitted, func(tx *querier) error {
		// The retry: RUNNING again, its task rewritten but still QUEUED
		// at the same attempt.
		requeued := *task
		requeued.RunAt = now.Add(time.Second)
		if _, err := tx.Apply(ctx, &store.Write{ID: inst.ID, ExpectedVersion: failed.Version, From: failed.Status,
			Status: workflow.StatusRunning, State: failed.State, Cause: "retry", Now: now,
			Update: []store.TaskWrite{{Task: &requeued, Guard: store.GuardOf(task)}}}); err != nil {
			return err
		}
		go func() { _, err := s.Apply(ctx, orphan); done <- err }()
		waitFor(t, 10*time.Second, "the orphan's cancel waits for the task row", func() bool {
			var n int
			err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH x AS%'`).Scan(&n)
			if len(done) > 0 {
				return true // ended without waiting: checked below
			}
			return err == nil && n == 1
		})
		return nil
	})
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	err = <-done
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) {
		t.Errorf("the orphan's cancel after the retry committed = %v (%T), want a *store.ConflictError", err, err)
	}
	rows, err := s.TasksOfInstance(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Status != store.TaskQueued {
		t.Errorf("the retried instance's task is %s, want QUEUED", rows[0].Status)
	}
}
