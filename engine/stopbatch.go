package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// stopBatch is a batch to a status other than RUNNING: it reads the
// instances (store.BatchReader), decides each one's move (rules.SetStatus:
// a status that stops steps cancels the instance's active tasks) and
// writes it guarded by what it read. The outcome of a child for its
// parent's step (and up) is written with it (withParents: one ApplyGroup
// for each such child, in turn, so that the siblings of one parent each
// see the parent as the one before left it); the other instances are
// written together (ApplyEach). An instance that moved meanwhile is left
// out and its place read again (inRounds). It returns the ids moved and
// the parents' writes made, also when it fails part way.
func (e *Engine) stopBatch(ctx context.Context, p store.BatchStatusParams) (ids []string, parents []*store.Write, err error) {
	ids = []string{}
	sel := store.BatchReadParams{Status: p.Status, UpdatedBefore: p.UpdatedBefore, IDs: p.IDs, Limit: p.Limit}
	err = inRounds(ctx, p.Limit, func(limit int) (read, wrote int, err error) {
		sel.Limit = limit
		items, err := e.st.BatchInstances(ctx, sel)
		if err != nil {
			return 0, 0, err
		}
		err = e.withDefs(ctx, func() error {
			now := e.clock()
			var own []*store.Write
			for _, it := range items {
				w := setStatusWrite(it, p, now)
				ws, err := e.withParents(ctx, e.st, w)
				if err != nil {
					return err
				}
				if len(ws) == 1 {
					own = append(own, w)
					continue
				}
				if _, _, err := e.st.ApplyGroup(ctx, nil, ws, nil); missed(err) {
					continue
				} else if err != nil {
					return err
				}
				ids, parents, wrote = append(ids, w.ID), append(parents, ws[1:]...), wrote+1
			}
			written, err := e.st.ApplyEach(ctx, own)
			for i, inst := range written {
				if inst != nil {
					ids, wrote = append(ids, own[i].ID), wrote+1
				}
			}
			return err
		})
		return len(items), wrote, err
	})
	return ids, parents, err
}

// missed reports a write that found its instance moved on or gone: it
// wrote nothing, and a fresh read decides again.
func missed(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)
}

// inRounds runs a batch's rounds until it is done: round reads at most
// limit instances, writes those that did not move since it read them and
// reports how many it read and wrote. The batch is done when a round
// wrote all it read or the batch is full; a round that wrote nothing is
// run again after a short pause, batchAttempts times at most — then the
// batch is a conflict if it moved nothing at all.
func inRounds(ctx context.Context, limit int, round func(limit int) (read, wrote int, err error)) error {
	moved := 0
	for attempt := 1; ; attempt++ {
		read, wrote, err := round(limit - moved)
		moved += wrote
		switch {
		case err != nil:
			return err
		case wrote == read || moved == limit:
			return nil
		case wrote > 0:
			continue
		case attempt >= batchAttempts && moved > 0:
			return nil
		case attempt >= batchAttempts:
			return fmt.Errorf("%w: the workflows of the batch kept changing while it was decided; try the batch again", store.ErrConflict)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
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
