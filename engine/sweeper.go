package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// sweepBatch bounds every sweep transaction.
const sweepBatch = 200

// sweeper runs Sweep every SweepInterval until ctx ends. Every node runs
// one; the guards of the writes keep them from doing the same work twice.
func (e *Engine) sweeper(ctx context.Context) {
	t := time.NewTicker(e.sweep)
	defer t.Stop()
	for {
		if err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("sweep failed", "err", err)
		}
		if !e.untilNextSweep(ctx, t.C) {
			return
		}
	}
}

// untilNextSweep waits for the next tick, working off abandoned children
// meanwhile whenever a cancel on this node asks for it (cascadeSoon): a
// cancel's descendants are cancelled at once, the rest at the tick. It
// reports false when ctx ended.
func (e *Engine) untilNextSweep(ctx context.Context, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-e.cascadeWake:
			if err := e.sweepAbandoned(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("cancelling abandoned child workflows failed", "err", err)
			}
		}
	}
}

// Sweep does one round of the sweeper's work: child workflows whose parent
// no longer runs are cancelled, level by level (engine/cascade.go),
// instances past their deadline become TIMED_OUT, expired leases use up
// their attempt and are re-queued (or
// fail the step), tasks of instances that stopped running are cancelled
// (those of the children the cancel cascade moved), finished
// instances past their retention are deleted (engine/retention.go),
// waiting steps whose own look-up of a stored event never ran get it
// (engine/events.go), QUEUED instances whose key has a free slot start
// (engine/concurrency.go: the node whose write freed it may have died
// before starting them), and idempotency keys past their 24 hours, events past
// the event retention and workers that stopped polling long ago are
// deleted.
//
// Each item of work is read (store.TaskQuerier.Due, no locks), decided by
// the rules and written with one guarded Apply, as every engine write is:
// when another node's sweep, or any other write, moved the item in between,
// the write misses and the item is decided again on a fresh read, which
// finds it done or no longer due. So two nodes sweeping at once never
// apply one item twice.
func (e *Engine) Sweep(ctx context.Context) error {
	// Children of workflows that stopped first: each one's write cancels
	// its tasks.
	if err := e.sweepAbandoned(ctx); err != nil {
		return err
	}
	for _, kind := range []store.DueKind{store.DueTimeouts, store.DueLeases} {
		if err := e.sweepDue(ctx, kind); err != nil {
			return err
		}
	}
	if err := e.sweepEventWaits(ctx); err != nil {
		return err
	}
	if err := e.promoteDue(ctx); err != nil {
		return err
	}
	if err := e.deleteExpiredKeys(ctx); err != nil {
		return err
	}
	if err := e.deleteExpiredEvents(ctx); err != nil {
		return err
	}
	if err := e.deleteEndedBulk(ctx); err != nil {
		return err
	}
	if err := e.deleteExpired(ctx); err != nil {
		return err
	}
	return e.pruneWorkers(ctx)
}

// sweepRounds bounds the batches of one kind a sweep works off: a backlog
// is worked off over several sweeps instead of holding this one up.
const sweepRounds = 10

// sweepDue works off the due items of kind, sweepBatch at a time, until a
// batch is not full (or wrote nothing: what is left is left to the next
// sweep).
func (e *Engine) sweepDue(ctx context.Context, kind store.DueKind) error {
	for range sweepRounds {
		items, err := e.st.Due(ctx, store.DueParams{Kind: kind, Now: e.clock(), Limit: sweepBatch})
		if err != nil {
			return err
		}
		written, requeued := 0, false
		for _, it := range items {
			var w *store.Write
			err := e.withDefs(ctx, func() error {
				var err error
				w, err = e.sweepItem(ctx, kind, it)
				return err
			})
			if err != nil {
				return err
			}
			if w == nil {
				continue
			}
			written++
			requeued = requeued || w.Notify
			e.logSwept(kind, it, w)
		}
		if requeued {
			e.wake()
		}
		if len(items) < sweepBatch || written == 0 {
			return nil
		}
	}
	return nil
}

// sweepItem decides one due item and writes it: the item as Due read it
// first, then, when that write missed, a fresh read. It returns the write,
// or nil when there was nothing (left) to do.
func (e *Engine) sweepItem(ctx context.Context, kind store.DueKind, it store.DueItem) (*store.Write, error) {
	fresh := false
	// A task's guard decides an item of a task; a timeout writes the
	// instance alone.
	on := subject{}
	if kind == store.DueTimeouts {
		on = about(it.Instance.ID)
	}
	_, w, _, err := e.readDecideApply(ctx, on, func(q store.Querier, now time.Time) (*decided, error) {
		inst, row := it.Instance, it.Task
		if fresh {
			var err error
			if inst, row, err = e.readDue(ctx, q, it); err != nil {
				return nil, err
			}
		}
		fresh = true
		// The rules change the instance they decide on: a copy, since the
		// items of one instance share it.
		work := *inst
		work.State = inst.State.Clone()
		switch kind {
		case store.DueTimeouts:
			return decideTimeout(&work, now), nil
		default:
			return e.decideExpiry(ctx, q, &work, row, now)
		}
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // deleted meanwhile: nothing left to do
	}
	if err == nil && w != nil && it.Task != nil && it.Task.Queue == store.QueueChild &&
		kind == store.DueLeases && !w.TasksOnly {
		// The attempt timed out: the attempt's child must not run on.
		e.cancelAbandonedChild(ctx, it.Instance, it.Task.StepID, it.Task.Iteration)
	}
	return w, err
}

// readDue reads the item's instance and task again.
func (e *Engine) readDue(ctx context.Context, q store.Querier, it store.DueItem) (*workflow.Instance, *store.Task, error) {
	inst, err := q.Get(ctx, it.Instance.ID)
	if err != nil || it.Task == nil {
		return inst, nil, err
	}
	row, err := q.Task(ctx, it.Task.ID)
	return inst, row, err
}

// decideTimeout is the workflow timeout of inst (rules.TimeOut), nil when
// it no longer applies.
func decideTimeout(inst *workflow.Instance, now time.Time) *decided {
	d := &decided{id: inst.ID, version: inst.Version, from: inst.Status}
	var ok bool
	if d.ch, ok = rules.TimeOut(inst, now); !ok {
		return nil
	}
	return d
}

// decideExpiry is the expiry of row's lease, nil when the lease is no longer
// one that ended: a timer is re-queued (rules.ExpireTimer) and a task of a
// step its instance no longer runs cancelled, both as task rows alone; any
// other expiry uses up the attempt (rules.Env.ExpireLease) in a version of
// the instance. Every write is guarded by the row as read, whose lease
// ended: a heartbeat or a completion since makes it miss.
func (e *Engine) decideExpiry(ctx context.Context, q store.Querier, inst *workflow.Instance, row *store.Task, now time.Time) (*decided, error) {
	if !rules.LeaseEnded(row, now) {
		return nil, nil
	}
	t := *row
	ended := store.GuardOf(row)
	if rules.IsTimer(t.Queue) {
		rules.ExpireTimer(&t, now)
		return tasksOnly(inst.ID, "", true, rules.TaskUpdate{Task: t, Guard: ended}), nil
	}
	if inst.Status.Terminal() {
		rules.CancelTask(&t)
		return tasksOnly(inst.ID, "", false, rules.TaskUpdate{Task: t, Guard: ended}), nil
	}
	c, err := e.cached(inst)
	if err != nil {
		return nil, err
	}
	d := &decided{id: inst.ID, version: inst.Version, from: inst.Status}
	env := e.rulesFor(ctx)
	if row.Iteration > 0 {
		// An iteration that fails for good cancels the others: the rules
		// need their rows (an expiry is rare; a completion reads none).
		if env.Tasks, err = e.readRows(ctx, q, inst.ID, d); err != nil {
			return nil, err
		}
	}
	ch, ok, err := env.ExpireLease(c, inst, &t, now)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Its instance no longer runs the step.
		rules.CancelTask(&t)
		return tasksOnly(inst.ID, "", false, rules.TaskUpdate{Task: t, Guard: ended}), nil
	}
	d.ch = ch
	return d, nil
}

// logSwept logs and counts one item a sweep wrote.
func (e *Engine) logSwept(kind store.DueKind, it store.DueItem, w *store.Write) {
	switch kind {
	case store.DueTimeouts:
		e.log.Info("workflow timed out", "workflow", it.Instance.ID)
	case store.DueLeases:
		t := w.Update[0].Task
		if e.m != nil {
			e.m.LeaseExpirations.Inc()
		}
		e.log.Info("lease expired", "task", t.ID, "workflow", t.InstanceID, "step", t.StepID, "attempt", t.Attempt,
			"reason", rules.ExpiryReason(&store.Task{Attempt: it.Task.Attempt, AttemptDeadline: it.Task.AttemptDeadline}, w.Now), "next", t.Status)
	}
}

// keySweepBatch bounds each delete of expired idempotency keys;
// keySweepRounds bounds the deletes of one sweep, so that a backlog (a day
// of keys expiring at once) is worked off over several sweeps instead of
// holding this one up.
const (
	keySweepBatch  = 1000
	keySweepRounds = 10
)

// deleteExpiredKeys deletes idempotency keys older than
// store.IdempotencyKeyTTL, in batches. They no longer count (a create
// replaces them), so this only keeps the table from growing.
func (e *Engine) deleteExpiredKeys(ctx context.Context) error {
	before := e.clock().Add(-store.IdempotencyKeyTTL)
	for range keySweepRounds {
		pruned, err := e.st.Prune(ctx, store.PruneParams{Kind: store.PruneIdempotencyKeys, Before: before, Limit: keySweepBatch})
		if err != nil {
			return fmt.Errorf("deleting expired idempotency keys: %w", err)
		}
		if pruned.Count < keySweepBatch {
			break
		}
	}
	return nil
}
