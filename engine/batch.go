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

// BatchStatus is POST /v1/batch/status: it moves at most p.Limit instances
// of p.Status updated before p.UpdatedBefore to p.NewStatus, oldest first,
// all of them or none, and returns their ids. Each instance is read
// (store.BatchReader, which on PostgreSQL locks those no other batch
// holds, so that two batches never take one instance), decided by the
// rules and written with the engine's guarded write: a status that stops
// steps cancels the instance's tasks and tells a child's parent
// (stopbatch.go); a batch to RUNNING also does for each definition-based
// instance what resume (from PAUSED) or retry (from FAILED or TIMED_OUT)
// does: an instance that only changes status gets version +1; one with
// steps to schedule or reset, or that settles, gets a second version.
func (e *Engine) BatchStatus(ctx context.Context, p store.BatchStatusParams) ([]string, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if p.NewStatus != workflow.StatusRunning {
		ids, parents, err := e.stopBatch(ctx, p)
		if err == nil {
			e.afterStopBatch(ctx, p, ids, parents)
		}
		return ids, err
	}
	b := &reopenBatch{e: e, p: p, retry: p.Status == workflow.StatusFailed || p.Status == workflow.StatusTimedOut,
		cause: p.Cause + ": resume", decided: map[string]reopening{}}
	switch {
	case b.retry:
		b.cause = p.Cause + ": retry"
	case p.Status == workflow.StatusQueued:
		// A QUEUED instance starts: its first steps scheduled and its
		// workflow timeout from now, as a retry's (its steps are all
		// PENDING, so there is nothing else for a retry to reset). The
		// store refuses the batch whole when it would exceed a key's
		// concurrency limit.
		b.retry, b.cause = true, p.Cause+": start"
	}
	ids, writes, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		e.wake()
	}
	for _, w := range writes {
		e.takeEvents(ctx, nil, w)
	}
	return ids, nil
}

// batchAttempts bounds how often BatchStatus runs a batch that conflicted
// with another transaction, and how often it decides again for instances
// that moved between its decisions and its write.
const batchAttempts = 5

// errUndecided rolls back a batch that read instances it has no decision
// for yet.
var errUndecided = errors.New("the batch read instances it has not decided for")

// reopenBatch is one batch to RUNNING: decided holds, by instance, what it
// writes for an instance as read (its version and task rows).
type reopenBatch struct {
	e       *Engine
	p       store.BatchStatusParams
	retry   bool
	cause   string
	decided map[string]reopening
}

// reopening is what the batch writes for an instance read at version with
// tasks: its move to RUNNING, and what resume or retry then writes (nil:
// nothing).
type reopening struct {
	version int64
	tasks   []*store.Task
	move    *decided
	d       *decided
}

// run runs the batch until it is written with a decision for every
// instance it reads, and returns their ids and the writes made.
//
// The decisions are made outside the transaction (a decision may evaluate
// programs for a second, which must not hold a single-writer store's write
// lock): a transaction that reads instances it has none for, or that
// moved since, rolls back, and the batch is decided and run again. A write
// that conflicts with another transaction fails the batch whole: it is run
// again a few times before the client is told to.
func (b *reopenBatch) run(ctx context.Context) (ids []string, writes []*store.Write, err error) {
	sel := b.selection()
	first, err := b.e.st.BatchInstances(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	if err := b.decide(ctx, first); err != nil {
		return nil, nil, err
	}
	sel.Lock = true
	conflicts, rounds := 0, 0
	for {
		var undecided []store.BatchItem
		err = b.e.st.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
			ids, writes, undecided = []string{}, nil, nil
			items, err := tx.BatchInstances(ctx, sel)
			if err != nil {
				return err
			}
			now := b.e.clock()
			for _, it := range items {
				r, ok := b.decided[it.Instance.ID]
				if !ok || r.version != it.Instance.Version || !sameRows(r.tasks, it.Tasks) {
					undecided = append(undecided, it)
					continue
				}
				ids = append(ids, it.Instance.ID)
				writes = append(writes, r.move.write(now))
				if r.d != nil {
					writes = append(writes, r.d.write(now))
				}
			}
			if len(undecided) > 0 {
				return errUndecided
			}
			if len(writes) == 0 {
				return nil
			}
			_, _, err = tx.ApplyGroup(ctx, nil, writes, nil)
			return err
		})
		switch {
		case errors.Is(err, errUndecided) && rounds < batchAttempts:
			rounds++
			if err := b.decide(ctx, undecided); err != nil {
				return nil, nil, err
			}
			continue
		case errors.Is(err, errUndecided):
			return nil, nil, fmt.Errorf("%w: the workflows of the batch kept changing while it was decided; try the batch again", store.ErrConflict)
		case errors.Is(err, store.ErrConflict) && conflicts+1 < batchAttempts && ctx.Err() == nil:
			conflicts++
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(conflicts) * 10 * time.Millisecond):
			}
			continue
		case err != nil:
			return nil, nil, err
		}
		return ids, writes, nil
	}
}

// selection is what the batch reads.
func (b *reopenBatch) selection() store.BatchReadParams {
	return store.BatchReadParams{Status: b.p.Status, UpdatedBefore: b.p.UpdatedBefore, IDs: b.p.IDs, Limit: b.p.Limit}
}

// decide decides, outside any transaction, what the batch writes for each
// instance as read: its move to RUNNING (rules.SetStatus, a version of its
// own, which wakes the workers: tasks queued before a pause are claimable
// again) and then, for a definition-based instance, what resume or retry
// writes on the version the move leaves (rules.Env.Reopen): a second
// version only when that changes something.
func (b *reopenBatch) decide(ctx context.Context, items []store.BatchItem) error {
	return b.e.withDefs(ctx, func() error {
		now := b.e.clock()
		for _, it := range items {
			id, read := it.Instance.ID, byID(it.Tasks...)
			// The move releases the tasks a paused instance held.
			move := &decided{id: id, version: it.Instance.Version, from: it.Instance.Status, cause: b.p.Cause, read: read,
				ch: rules.SetStatus(it.Instance, workflow.StatusRunning, copies(it.Tasks))}
			move.ch.Notify = true
			r := reopening{version: it.Instance.Version, tasks: it.Tasks, move: move}
			if it.Instance.Definition != "" {
				c, err := b.e.cached(it.Instance)
				if err != nil {
					return err
				}
				if !c.Language.CanRetry() && b.retry {
					return &rules.NotAllowedError{Msg: fmt.Sprintf("cannot retry workflow %s: a Serverless Workflow instance that faulted cannot be retried", id)}
				}
				// The rules change the instance they decide on: a copy, as
				// the move leaves it.
				inst := *it.Instance
				inst.State = it.Instance.State.Clone()
				inst.Status, inst.Version = workflow.StatusRunning, it.Instance.Version+1
				d := &decided{id: id, version: inst.Version, from: inst.Status, cause: b.cause, read: read}
				var write bool
				if d.ch, write = b.e.rulesFor(ctx).Reopen(c, &inst, byStep(it.Tasks), b.retry, now); write {
					d.ch.CancelWithdrawn(copies(it.Tasks))
					r.d = d
				}
			}
			b.decided[id] = r
		}
		return nil
	})
}

// sameRows reports whether two reads of an instance's task rows found the
// same rows with the same statuses and attempts (what a decision on them
// guards).
func sameRows(a, b []*store.Task) bool {
	if len(a) != len(b) {
		return false
	}
	was := byID(a...)
	for _, t := range b {
		if r := was[t.ID]; r == nil || r.Status != t.Status || r.Attempt != t.Attempt {
			return false
		}
	}
	return true
}
