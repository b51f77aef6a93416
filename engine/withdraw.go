package engine

import (
	"context"

	"github.com/flowd/flowd/store"
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
	rows, err := q.TasksOfInstance(ctx, d.id, store.LockNone)
	if err != nil {
		return err
	}
	d.ch.CancelWithdrawn(views(rows))
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
