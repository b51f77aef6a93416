package sqlite

import (
	"context"

	"github.com/flowd/flowd/store"
)

// applyTasks writes a TasksOnly w in one write transaction: the instance's status checked against w.From, then each
// guarded task update; a miss returns its conflict from inside the
// transaction, which rolls everything back. See store.Write.TasksOnly.
func (q *querier) applyTasks(ctx context.Context, w *store.Write) error {
	if err := w.Prepare(); err != nil {
		return err
	}
	updates, err := prepareTaskWrites(w.Update, q.now())
	if err != nil {
		return err
	}
	err = q.write(ctx, func(c dbtx) error {
		status, _, err := currentStatus(ctx, c, w.ID)
		if err != nil {
			return err
		}
		if w.From != "" && status != w.From {
			return w.StatusConflict(status)
		}
		for i, u := range w.Update {
			if err := applyTaskWrite(ctx, c, &updates[i], u.Guard, w); err != nil {
				return err
			}
		}
		return applyLeased(ctx, c, store.LeasedChanges(w.Update, nil))
	})
	if err != nil {
		return err
	}
	for i, u := range w.Update {
		*u.Task = updates[i]
	}
	return nil
}
