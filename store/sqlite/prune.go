package sqlite

import (
	"context"

	"github.com/flowd/flowd/store"
)

// Prune deletes one batch of p.Kind's expired rows; see store.RetentionStore.
func (q *querier) Prune(ctx context.Context, p store.PruneParams) (store.Pruned, error) {
	return store.PruneFuncs{Instances: q.deleteFinished, Events: q.deleteEventsBefore,
		IdempotencyKeys: q.deleteKeysBefore, Workers: q.deleteWorkersBefore, Bulk: q.deleteBulkBefore}.Prune(ctx, p)
}

// dueReads are the look-ups Due serves besides the sweeper's reads.
func (q *querier) dueReads() store.DueReads {
	return store.DueReads{Queued: q.queuedDue, Holder: q.oldestHolder, Waiters: q.queuedTasks,
		EventWaiters: q.tasksWithEvents, Event: q.oldestEvent}
}
