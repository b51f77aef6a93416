package storetest

import (
	"context"

	"github.com/flowd/flowd/store"
)

// Batch moves instances as the engine's batch of a status change alone
// does: it reads them (BatchInstances, locking them where the store
// locks) and writes each one's move with one ApplyGroup guarded by the
// versions read, in one transaction when q is a store.Store. It returns
// the ids moved, oldest updated_at first.
func Batch(ctx context.Context, q store.Querier, p store.BatchStatusParams) ([]string, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	var ids []string
	run := func(q store.Querier) error {
		ids = []string{}
		items, err := q.BatchInstances(ctx, store.BatchReadParams{Status: p.Status, UpdatedBefore: p.UpdatedBefore,
			IDs: p.IDs, Limit: p.Limit, Lock: true})
		if err != nil || len(items) == 0 {
			return err
		}
		ws := make([]*store.Write, len(items))
		for i, it := range items {
			inst := it.Instance
			ws[i] = &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: p.NewStatus,
				State: inst.State, Deadline: inst.Deadline, Cause: p.Cause}
			ids = append(ids, inst.ID)
		}
		_, _, err = q.ApplyGroup(ctx, nil, ws, nil)
		return err
	}
	var err error
	if s, ok := q.(store.Store); ok {
		err = s.WithTx(ctx, store.ReadCommitted, run)
	} else {
		err = run(q)
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}
