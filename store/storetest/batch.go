package storetest

import (
	"context"

	"github.com/flowd/flowd/store"
)

// Batch moves instances as the engine's batch of a status change alone
// does: it reads them (BatchInstances, which locks nothing) and writes
// each one's move with one ApplyEach guarded by the versions read; an
// instance that moved meanwhile is left out and its place read again. It
// returns the ids moved, in the order written.
func Batch(ctx context.Context, q store.Querier, p store.BatchStatusParams) ([]string, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	ids := []string{}
	for range 100 { // bounded: a round writes at least one, or reads none
		items, err := q.BatchInstances(ctx, store.BatchReadParams{Status: p.Status, UpdatedBefore: p.UpdatedBefore,
			IDs: p.IDs, Limit: p.Limit - len(ids)})
		if err != nil {
			return nil, err
		}
		ws := make([]*store.Write, len(items))
		for i, it := range items {
			inst := it.Instance
			ws[i] = &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: p.NewStatus,
				State: inst.State, Deadline: inst.Deadline, Cause: p.Cause}
		}
		written, err := q.ApplyEach(ctx, ws)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, inst := range written {
			if inst != nil {
				ids = append(ids, inst.ID)
				n++
			}
		}
		if n == len(items) || len(ids) == p.Limit {
			break
		}
	}
	return ids, nil
}
