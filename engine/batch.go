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

// BatchStatus is POST /v1/batch/status: store.Querier.BatchUpdateStatus, in
// one transaction. A batch to RUNNING also does for each definition-based
// instance it moved what resume (from PAUSED) or retry (from FAILED or
// TIMED_OUT) does, in the same transaction: an instance that only changes
// status stays at version +1; one with steps to schedule or reset, or that
// settles, gets a second version.
//
// What each instance then does is decided outside the transaction (a
// decision may evaluate programs for a second, which must not hold a
// single-writer store's write lock): a transaction that moves instances it
// has no decision for, made on the version the batch leaves them at, reads
// them, rolls back, and the batch is decided and run again.
func (e *Engine) BatchStatus(ctx context.Context, p store.BatchStatusParams) ([]string, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if p.NewStatus.StopsSteps() {
		// Their tasks cancelled and their parents told in the batch's
		// transaction (stopbatch.go).
		ids, parents, err := e.stopBatch(ctx, p)
		if err == nil {
			e.afterStopBatch(ctx, p, ids, parents)
		}
		return ids, err
	}
	if p.NewStatus != workflow.StatusRunning {
		return e.st.BatchUpdateStatus(ctx, p)
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
	// Tasks queued before a pause are claimable again: the batch wakes
	// the workers even where it writes no task.
	b.p.Notify = true
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

// batchAttempts bounds how often BatchStatus runs a batch to RUNNING that
// conflicted with another transaction, and how often it decides again for
// instances that moved between its decisions and its write.
const batchAttempts = 5

// errUndecided rolls back a batch that moved instances it has no decision
// for yet.
var errUndecided = errors.New("the batch moved instances it has not decided for")

// reopenBatch is one batch to RUNNING: decided holds, by instance, what
// resume or retry writes after the batch moved it.
type reopenBatch struct {
	e       *Engine
	p       store.BatchStatusParams
	retry   bool
	cause   string
	decided map[string]reopening
}

// reopening is what resume or retry writes for an instance that the batch
// leaves at version with tasks (d nil: nothing).
type reopening struct {
	version int64
	tasks   []*store.Task
	d       *decided
}

// moved is an instance as a batch left it, with its tasks, to decide on.
type moved struct {
	inst  *workflow.Instance
	tasks []*store.Task
}

// run runs the batch until it is written with a decision for every
// instance it moves, and returns their ids and the writes made.
//
// A task row another transaction holds for a moment (a worker's
// completion, the sweeper cancelling the task of a stopped instance) fails
// the batch with a conflict and rolls it back whole: it is run again a few
// times before the client is told to.
func (b *reopenBatch) run(ctx context.Context) (ids []string, writes []*store.Write, err error) {
	conflicts, rounds := 0, 0
	for {
		var undecided []moved
		err = b.e.st.WithTx(ctx, store.ReadCommitted, func(tx store.Querier) error {
			writes, undecided = writes[:0], nil
			var err error
			if ids, err = tx.BatchUpdateStatus(ctx, b.p); err != nil {
				return err
			}
			now := b.e.clock()
			for _, id := range slices.Sorted(slices.Values(ids)) {
				m, w, err := b.write(ctx, tx, id, len(undecided) == 0, now)
				if err != nil {
					return err
				}
				if m != nil {
					undecided = append(undecided, *m)
				}
				if w != nil {
					writes = append(writes, w)
				}
			}
			if len(undecided) > 0 {
				return errUndecided
			}
			return nil
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

// write writes, in the batch's transaction tx, what was decided for
// instance id, which the batch moved to RUNNING (and so holds locked), when
// that decision was made on the instance and the tasks as they are (the
// version the batch left it at; each task's status and attempt); else it
// returns them for a decision (m). Nothing is written once an instance
// lacks a decision (apply false): the transaction rolls back.
//
// The batch holds the instance before its tasks, against the lock order
// (tasks first): so it takes the task rows with SKIP LOCKED and never waits
// for one. A row another transaction holds is a task still in use (a retry
// re-queues the rows of steps that were running when the instance failed or
// timed out): the batch then fails with a conflict, to be tried again,
// rather than deadlock with that worker's completion.
func (b *reopenBatch) write(ctx context.Context, tx store.Querier, id string, apply bool, now time.Time) (m *moved, w *store.Write, err error) {
	cur, err := tx.Get(ctx, id)
	if err != nil || cur.Definition == "" {
		return nil, nil, err // a free-form instance: the status change is all there is
	}
	tasks, err := tx.TasksOfInstance(ctx, id, store.LockNone)
	if err != nil {
		return nil, nil, err
	}
	r, ok := b.decided[id]
	if !ok || r.version != cur.Version || !sameRows(r.tasks, tasks) {
		return &moved{inst: cur, tasks: tasks}, nil, nil
	}
	d := r.d
	if d == nil || !apply {
		return nil, nil, nil
	}
	locked, err := tx.TasksOfInstance(ctx, id, store.LockSkipLocked)
	if err != nil {
		return nil, nil, err
	}
	held := byID(locked...)
	for _, t := range d.read {
		if held[t.ID] == nil {
			return nil, nil, fmt.Errorf("%w: workflow %s: its task for step %q is in use by another transaction; try the batch again", store.ErrConflict, id, t.StepID)
		}
	}
	// Guarded by the version the decision was made on and by the task
	// rows as read.
	w = d.write(now)
	_, err = tx.Apply(ctx, w)
	return nil, w, err
}

// decide decides, outside any transaction, what resume or retry writes for
// each instance as the batch left it (rules.Env.Reopen): a version only
// when that changes something.
func (b *reopenBatch) decide(ctx context.Context, ms []moved) error {
	return b.e.withDefs(ctx, func() error {
		now := b.e.clock()
		for _, m := range ms {
			c, err := b.e.cached(m.inst)
			if err != nil {
				return err
			}
			id := m.inst.ID
			if !c.Language.CanRetry() && b.retry {
				return &rules.NotAllowedError{Msg: fmt.Sprintf("cannot retry workflow %s: a Serverless Workflow instance that faulted cannot be retried", id)}
			}
			// The rules change the instance they decide on.
			inst := *m.inst
			inst.State = m.inst.State.Clone()
			d := &decided{id: id, version: inst.Version, from: inst.Status, cause: b.cause, read: byID(m.tasks...)}
			var write bool
			if d.ch, write = b.e.rulesFor(ctx).Reopen(c, &inst, byStep(m.tasks), b.retry, now); !write {
				d = nil // nothing to write at this version
			} else {
				d.ch.CancelWithdrawn(copies(m.tasks))
			}
			b.decided[id] = reopening{version: m.inst.Version, tasks: m.tasks, d: d}
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
