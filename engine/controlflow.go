package engine

import (
	"context"
	"errors"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// cancelWithdrawn completes a decision whose `join: first` withdrew steps
// it was not given the task rows of (rules.Change.Withdrawn): it reads the
// instance's tasks and adds the cancels of the withdrawn steps' active
// ones to the same write, each guarded by its row as read, so a late
// completion, failure or heartbeat of such a task is refused. A row that
// moves in between makes the write conflict, and it is decided again.
func cancelWithdrawn(ctx context.Context, q store.Querier, d *decided) error {
	if len(d.ch.Withdrawn) == 0 {
		return nil
	}
	rows, err := q.TasksOfInstance(ctx, d.id)
	if err != nil {
		return err
	}
	d.ch.CancelWithdrawn(copies(rows))
	if d.read == nil {
		d.read = map[string]*store.Task{}
	}
	for _, r := range rows {
		if d.read[r.ID] == nil {
			d.read[r.ID] = r
		}
	}
	return nil
}

// completeAtStart writes the second version of a start whose steps were
// all skipped (rules.Env.Start's Change.Settled): the instance, created
// RUNNING at version 0, moves to COMPLETED with its output, guarded by
// the version it is at.
func (e *Engine) completeAtStart(ctx context.Context, created *workflow.Instance, ch *rules.Change) (*workflow.Instance, error) {
	if created.Version != 0 || created.Status != workflow.StatusRunning {
		return created, nil // a start replayed (its idempotency key): written before
	}
	w := &store.Write{
		ID: created.ID, ExpectedVersion: created.Version, From: workflow.StatusRunning,
		Status: ch.Settled, State: created.State, Cause: ch.SettledCause + ch.Note, Output: ch.Output,
		Now: e.clock(),
	}
	for {
		out, err := e.st.Apply(ctx, w)
		if err == nil {
			e.afterWrite(ctx, out, w)
		}
		if !errors.Is(err, store.ErrConflict) {
			return out, err
		}
		// Written in between (a PATCH of its variables): still RUNNING,
		// its steps still all skipped, it completes at that version.
		cur, err := e.st.Get(ctx, created.ID)
		if err != nil || cur.Status != workflow.StatusRunning {
			return cur, err
		}
		w.ExpectedVersion, w.State = cur.Version, cur.State
	}
}
