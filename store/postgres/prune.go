package postgres

import (
	"context"

	"github.com/flowd/flowd/store"
)

// Prune deletes one batch of p.Kind's expired rows; see store.RetentionStore.
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (store.Pruned, error) {
	return store.PruneFuncs{Instances: s.deleteFinished, Events: s.deleteEventsBefore,
		IdempotencyKeys: s.deleteKeysBefore, Workers: s.deleteWorkersBefore, Bulk: s.deleteBulkBefore}.Prune(ctx, p)
}

// dueReads are the look-ups Due serves besides the sweeper's reads.
func (q *querier) dueReads() store.DueReads {
	return store.DueReads{Queued: q.queuedDue, Holder: q.oldestHolder, Waiters: q.queuedTasks,
		EventWaiters: q.tasksWithEvents, Event: q.oldestEvent}
}
