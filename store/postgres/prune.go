package postgres

import (
	"context"

	"github.com/flowd/flowd/store"
)

// Prune deletes one batch of p.Kind's expired rows; see store.RetentionStore.
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (store.Pruned, error) {
	p, err := p.Check()
	if err != nil {
		return store.Pruned{}, err
	}
	var n int
	switch p.Kind {
	case store.PruneInstances:
		ids, err := s.deleteFinished(ctx, p)
		return store.Pruned{Count: len(ids), IDs: ids}, err
	case store.PruneEvents:
		n, err = s.deleteEventsBefore(ctx, p.Before, p.Limit)
	case store.PruneIdempotencyKeys:
		n, err = s.deleteKeysBefore(ctx, p.Before, p.Limit)
	case store.PruneWorkers:
		n, err = s.deleteWorkersBefore(ctx, p.Before)
	}
	return store.Pruned{Count: n}, err
}
