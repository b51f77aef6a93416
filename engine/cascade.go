package engine

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Cancel cascades. Cancelling a workflow (an action, a batch, a
// transition) writes that workflow alone, so the request
// answers as soon as it is cancelled, however many descendants it has. Its
// descendants are the sweepers' work, on every node and after any restart:
// the child workflows that still run whose parent no longer does
// (store.DueAbandoned) are cancelled a batch at a time
// (rules.CancelAbandoned): a batch is read again with its tasks
// (store.BatchReader) and written with one ApplyEach, each child's cancel
// guarded by what was read and its active tasks cancelled in its write
// (a child that moved meanwhile is left to the next read); that abandons
// their own children in turn. A sweep works level after level until none
// is left (or cascadeRounds), and a cancel on this node starts one at once
// (cascadeSoon) rather than at the next tick.

// cascadeBatch bounds the children one read of the cascade returns;
// cascadeRounds bounds the batches of one sweep (levels, and batches of a
// level), so that a huge tree is worked off over several sweeps.
const (
	cascadeBatch  = 1000
	cascadeRounds = 40
)

// cascadeSoon makes this node's sweeper work off abandoned children now.
func (e *Engine) cascadeSoon() {
	select {
	case e.cascadeWake <- struct{}{}:
	default:
	}
}

// sweepAbandoned cancels the child workflows whose parent no longer runs,
// a batch at a time, until none is left or cascadeRounds (what is left is
// left to the next sweep).
func (e *Engine) sweepAbandoned(ctx context.Context) error {
	for range cascadeRounds {
		items, err := e.st.Due(ctx, store.DueParams{Kind: store.DueAbandoned, Limit: cascadeBatch})
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return nil
		}
		written, err := e.cancelAbandoned(ctx, items)
		if err != nil {
			return err
		}
		if written == 0 {
			// Every child read moved before its cancel was written (it
			// started a child of its own, finished a step): read again in
			// a moment, rather than at the next sweep.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// cancelAbandoned cancels the children items read, and returns how many
// it cancelled: those that moved on meanwhile (another node cancelled
// them, they finished) are left to a fresh read.
func (e *Engine) cancelAbandoned(ctx context.Context, items []store.DueItem) (int, error) {
	read := make(map[string]*workflow.Instance, len(items))
	for _, it := range items {
		read[it.Instance.ID] = it.Instance
	}
	byStatus := rules.CancelAbandoned(slices.Collect(maps.Values(read)))
	// An updated_at cannot be later than now; a year covers clocks that
	// differ.
	before := e.clock().AddDate(1, 0, 0)
	n := 0
	for _, from := range slices.Sorted(maps.Keys(byStatus)) {
		ids := byStatus[from]
		p := store.BatchStatusParams{Status: from, NewStatus: workflow.StatusCancelled, IDs: ids, Limit: len(ids),
			UpdatedBefore: before, Cause: rules.AbandonedCause}
		got, err := e.st.BatchInstances(ctx, store.BatchReadParams{Status: from, UpdatedBefore: before, IDs: ids, Limit: len(ids)})
		if err != nil {
			return n, err
		}
		ws := make([]*store.Write, len(got))
		now := e.clock()
		for i, it := range got {
			ws[i] = setStatusWrite(it, p, now)
		}
		written, err := e.st.ApplyEach(ctx, ws)
		if err != nil {
			return n, err
		}
		var moved []string
		for _, inst := range written {
			if inst != nil {
				moved = append(moved, inst.ID)
			}
		}
		n += len(moved)
		if rules.FreesSlot(from, workflow.StatusCancelled) {
			for _, id := range moved {
				e.afterFreed(ctx, read[id])
			}
		}
	}
	if n > 0 {
		e.log.Info("cancelled child workflows whose parent no longer runs", "workflows", n)
	}
	return n, nil
}
