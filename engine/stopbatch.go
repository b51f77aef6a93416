package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// stopBatch is a batch to a status that stops steps (COMPLETED, FAILED,
// TIMED_OUT, CANCELLED): in one transaction, the batch moves the
// instances (store.Querier.BatchUpdateStatus) and, for each one it moved,
// cancels its active tasks (rules.CancelTasks) and carries a child's
// outcome to its parent's step (withParents), each parent's write guarded
// as the engine's own. All of it or nothing: a parent or task that moved
// meanwhile fails the transaction with a conflict, and the batch is run
// again (batchAttempts). It returns the ids moved and the parents'
// writes made.
//
// A child's outcome is decided inside the transaction, on what it has
// written: the siblings of one parent moved by one batch then each see
// the parent as the one before left it.
func (e *Engine) stopBatch(ctx context.Context, p store.BatchStatusParams) (ids []string, parents []*store.Write, err error) {
	for attempt := 1; ; attempt++ {
		err = e.withDefs(ctx, func() error {
			return e.st.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
				parents = parents[:0]
				var err error
				if ids, err = tx.BatchUpdateStatus(ctx, p); err != nil {
					return err
				}
				now := e.clock()
				for _, id := range slices.Sorted(slices.Values(ids)) {
					pws, err := e.stopMoved(ctx, tx, id, p, now)
					if err != nil {
						return err
					}
					parents = append(parents, pws...)
				}
				return nil
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

// stopMoved writes, in the batch's transaction tx, what the move of
// instance id to p.NewStatus brings about: its active tasks cancelled,
// and the outcome of a child for its parent's step (and up). It returns
// the parents' writes.
func (e *Engine) stopMoved(ctx context.Context, tx store.Querier, id string, p store.BatchStatusParams, now time.Time) ([]*store.Write, error) {
	inst, err := tx.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := tx.TasksOfInstance(ctx, id, store.LockNone)
	if err != nil {
		return nil, err
	}
	if cancels := rules.CancelTasks(copies(rows)); len(cancels) > 0 {
		d := tasksOnly(id, inst.Status, false, cancels...)
		d.read = byID(rows...)
		if _, err := tx.Apply(ctx, d.write(now)); err != nil {
			return nil, err
		}
	}
	// The batch's version, as the engine's write of it would be.
	moved := &store.Write{ID: id, ExpectedVersion: inst.Version - 1, From: p.Status, Status: inst.Status,
		State: inst.State, Output: inst.Output, Now: now}
	ws, err := e.withParents(ctx, tx, moved)
	if err != nil {
		return nil, err
	}
	for _, pw := range ws[1:] {
		if _, err := tx.Apply(ctx, pw); err != nil {
			return nil, err
		}
	}
	return ws[1:], nil
}

// afterStopBatch does, once a stopBatch is committed, what follows the
// engine's writes: the slots freed are given to queued instances, the
// children of the instances stopped are the cascade's, and the parents'
// writes wake the workers and cancel the children they dropped.
func (e *Engine) afterStopBatch(ctx context.Context, p store.BatchStatusParams, ids []string, parents []*store.Write) {
	if len(ids) > 0 {
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
