package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// sweepBatch bounds every sweep transaction.
const sweepBatch = 200

// sweeper runs Sweep every SweepInterval until ctx ends. Every node runs one;
// SKIP LOCKED keeps them from doing the same work twice.
func (e *Engine) sweeper(ctx context.Context) {
	t := time.NewTicker(e.sweep)
	defer t.Stop()
	for {
		if err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep does one round of the sweeper's work: instances past their deadline
// become TIMED_OUT, expired leases use up their attempt and are re-queued (or
// fail the step), tasks of instances that stopped running are cancelled, and
// idempotency keys past their 24 hours and workers that stopped polling
// long ago are deleted.
func (e *Engine) Sweep(ctx context.Context) error {
	for {
		ids, err := e.st.TimeOutInstances(ctx, e.clock(), sweepBatch)
		if err != nil {
			return err
		}
		for _, id := range ids {
			e.log.Info("workflow timed out", "workflow", id)
		}
		if len(ids) < sweepBatch {
			break
		}
	}
	for {
		n, err := e.expireLeases(ctx)
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}
	if _, err := e.st.CancelOrphanTasks(ctx, 10*sweepBatch); err != nil {
		return err
	}
	if err := e.deleteExpiredKeys(ctx); err != nil {
		return err
	}
	if err := e.deleteExpired(ctx); err != nil {
		return err
	}
	return e.pruneWorkers(ctx)
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
		n, err := e.st.DeleteIdempotencyKeysBefore(ctx, before, keySweepBatch)
		if err != nil {
			return fmt.Errorf("deleting expired idempotency keys: %w", err)
		}
		if n < keySweepBatch {
			break
		}
	}
	return nil
}

// errSkip: the instance of an expired lease no longer runs its step; its
// task is cancelled and the instance is not written.
var errSkip = errors.New("step no longer running")

// expireLeases handles one batch of expired leases: tasks locked first (SKIP
// LOCKED), then their instances in id order. An expired lease or a timed-out
// attempt uses up the attempt, as a failure does, and is re-queued at once.
func (e *Engine) expireLeases(ctx context.Context) (int, error) {
	var n int
	requeued := false
	err := e.withDefs(ctx, func() error {
		n, requeued = 0, false
		return e.st.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
			now := e.clock()
			tasks, err := tx.LockExpired(ctx, now, sweepBatch)
			if err != nil {
				return err
			}
			n = len(tasks)
			slices.SortFunc(tasks, func(a, b *store.Task) int {
				if a.InstanceID < b.InstanceID {
					return -1
				} else if a.InstanceID > b.InstanceID {
					return 1
				}
				return 0
			})
			for _, row := range tasks {
				t := taskView(row)
				reason := rules.ExpiryReason(&t, now)
				if rules.IsTimer(t.Queue) {
					rules.ExpireTimer(&t, now)
				} else {
					var ch rules.Change
					_, err := tx.ModifyState(ctx, t.InstanceID, func(inst *workflow.Instance) error {
						c, err := e.cached(inst)
						if err != nil {
							return err
						}
						var ok bool
						if ch, ok = e.decide.ExpireLease(c, inst, &t, now); !ok {
							return errSkip
						}
						return nil
					}, rules.ExpiredCause(&t, reason))
					switch {
					case errors.Is(err, errSkip) || errors.Is(err, workflow.ErrTerminal):
						rules.CancelTask(&t) // its instance no longer runs the step
					case err != nil:
						return err
					default:
						t = ch.Update[0].Task
					}
				}
				if t.Status == rules.TaskQueued {
					requeued = true
				}
				setRow(row, &t)
				if err := tx.UpdateTask(ctx, row); err != nil {
					return err
				}
				if e.m != nil {
					e.m.LeaseExpirations.Inc()
				}
				e.log.Info("lease expired", "task", t.ID, "workflow", t.InstanceID, "step", t.StepID, "attempt", t.Attempt, "reason", reason, "next", t.Status)
			}
			if requeued {
				return tx.Notify(ctx)
			}
			return nil
		})
	})
	if requeued && err == nil {
		e.wake()
	}
	return n, err
}
