package engine

import (
	"context"
	"errors"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// stopBatch is a batch to a status other than RUNNING: in one transaction
// it reads the instances (store.BatchReader, locking them on PostgreSQL)
// and writes each one's change (rules.SetStatus: a status that stops steps
// cancels its active tasks) with the engine's guarded write; the outcome
// of a child for its parent's step (and up) is written with it
// (withParents), each parent's write guarded as the engine's own. All of
// it or nothing: a parent or task that moved meanwhile fails the
// transaction with a conflict, and the batch is run again
// (batchAttempts). It returns the ids moved and the parents' writes made.
//
// A child's outcome is decided inside the transaction, on what the batch
// has written: the siblings of one parent moved by one batch then each
// see the parent as the one before left it.
func (e *Engine) stopBatch(ctx context.Context, p store.BatchStatusParams) (ids []string, parents []*store.Write, err error) {
	sel := store.BatchReadParams{Status: p.Status, UpdatedBefore: p.UpdatedBefore, IDs: p.IDs, Limit: p.Limit, Lock: true}
	for attempt := 1; ; attempt++ {
		err = e.withDefs(ctx, func() error {
			return e.st.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
				ids, parents = []string{}, parents[:0]
				items, err := tx.BatchInstances(ctx, sel)
				if err != nil {
					return err
				}
				var own []*store.Write
				now := e.clock()
				for _, it := range items {
					ids = append(ids, it.Instance.ID)
					w := setStatusWrite(it, p, now)
					ws, err := e.withParents(ctx, tx, w)
					if err != nil {
						return err
					}
					if len(ws) == 1 {
						own = append(own, w)
						continue
					}
					// Written at once: a sibling's outcome is decided on
					// the parent as this one leaves it.
					if _, err := applyWrites(ctx, tx, ws); err != nil {
						return err
					}
					parents = append(parents, ws[1:]...)
				}
				return applyGroup(ctx, tx, own)
			})
		})
		if err == nil || !errors.Is(err, store.ErrConflict) || attempt == batchAttempts || ctx.Err() != nil {
			return ids, parents, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
}

// setStatusWrite is the write of a batch's move of it to p.NewStatus, the
// status alone (rules.SetStatus): a status that stops the instance cancels
// its active tasks in the same write.
func setStatusWrite(it store.BatchItem, p store.BatchStatusParams, now time.Time) *store.Write {
	d := &decided{id: it.Instance.ID, version: it.Instance.Version, from: it.Instance.Status, cause: p.Cause,
		read: byID(it.Tasks...), allRows: true}
	d.ch = rules.SetStatus(it.Instance, p.NewStatus, copies(it.Tasks))
	return d.write(now)
}

// applyGroup writes ws, decided on one read, as one atomic write.
func applyGroup(ctx context.Context, q store.Querier, ws []*store.Write) error {
	if len(ws) == 0 {
		return nil
	}
	_, _, err := q.ApplyGroup(ctx, nil, ws, nil)
	return err
}

// afterStopBatch does, once a stopBatch is committed, what follows the
// engine's writes: the slots freed are given to queued instances, the
// children of the instances stopped are the cascade's, and the parents'
// writes wake the workers and cancel the children they dropped.
func (e *Engine) afterStopBatch(ctx context.Context, p store.BatchStatusParams, ids []string, parents []*store.Write) {
	if len(ids) > 0 && p.NewStatus.StopsSteps() {
		e.cascadeSoon()
	}
	if rules.FreesSlot(p.Status, p.NewStatus) {
		for _, id := range ids {
			if inst, err := e.st.Get(ctx, id); err == nil {
				e.afterFreed(ctx, inst)
			}
		}
	}
	e.wakeForParents(parents)
	for _, pw := range parents {
		e.cancelDroppedChildren(ctx, pw)
		if rules.FreesSlot(pw.From, pw.FinalStatus()) {
			if inst, err := e.st.Get(ctx, pw.ID); err == nil {
				e.afterFreed(ctx, inst)
			}
		}
	}
}
