package sqlite

import (
	"context"
	"errors"

	"github.com/flowd/flowd/store"
)

// dueRead reads the kinds of checked p that are not sweeps: the
// concurrency limits' and the event waits' look-ups. ok is false for the
// other kinds.
func (q *querier) dueRead(ctx context.Context, p store.DueParams) (items []store.DueItem, ok bool, err error) {
	switch p.Kind {
	case store.DueQueued:
		insts, err := q.queuedDue(ctx, p)
		return store.InstanceItems(insts), true, err
	case store.DueHolder:
		inst, err := q.oldestHolder(ctx, p.Definition, p.Key)
		if errors.Is(err, store.ErrNotFound) {
			return []store.DueItem{}, true, nil
		}
		if err != nil {
			return nil, true, err
		}
		return []store.DueItem{{Instance: inst}}, true, nil
	case store.DueWaiters:
		tasks, err := q.queuedTasks(ctx, p.Queue, p.Limit)
		return store.TaskItems(tasks), true, err
	case store.DueEventWaiters:
		tasks, err := q.tasksWithEvents(ctx, p.Since, p.WrittenBefore, p.Limit)
		return store.TaskItems(tasks), true, err
	case store.DueEvent:
		e, err := q.oldestEvent(ctx, p.Queue, p.Since)
		if errors.Is(err, store.ErrNotFound) {
			return []store.DueItem{}, true, nil
		}
		if err != nil {
			return nil, true, err
		}
		return []store.DueItem{{Event: e}}, true, nil
	}
	return nil, false, nil
}
