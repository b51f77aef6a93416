package engine

import (
	"context"
	"fmt"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// BatchStatus is POST /v1/batch/status: it moves at most p.Limit instances
// of p.Status updated before p.UpdatedBefore to p.NewStatus, oldest first,
// and returns their ids. The instances are read (store.BatchReader, which
// locks nothing), each one's change decided by the rules and written, all
// in one transaction, guarded by what was read (store.Applier.ApplyEach):
// an instance that moved meanwhile — another batch took it, the engine
// wrote it — is left out and the batch reads again for its place, so two
// batches at once never return one id. A status that stops steps cancels
// the instance's tasks and tells a child's parent (stopbatch.go); a batch
// to RUNNING does for each definition-based instance what resume (from
// PAUSED) or retry (from FAILED or TIMED_OUT) does, in the same version
// (+1; +2 for one that then settles, as the action's).
func (e *Engine) BatchStatus(ctx context.Context, p store.BatchStatusParams) ([]string, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if p.NewStatus != workflow.StatusRunning {
		// What a failed batch wrote before it failed is followed up too.
		ids, parents, err := e.stopBatch(ctx, p)
		e.afterStopBatch(ctx, p, ids, parents)
		if err != nil {
			return nil, err
		}
		return ids, nil
	}
	b := &reopenBatch{e: e, p: p, retry: p.Status == workflow.StatusFailed || p.Status == workflow.StatusTimedOut,
		cause: p.Cause + ": resume"}
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
	if len(ids) > 0 {
		e.wake()
	}
	for _, w := range writes {
		e.takeEvents(ctx, nil, w)
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// batchAttempts bounds how often a batch reads and decides again when
// none of the instances it decided for could be written (each had moved:
// another batch took them, or the engine wrote them meanwhile).
const batchAttempts = 20

// reopenBatch is one batch to RUNNING.
type reopenBatch struct {
	e     *Engine
	p     store.BatchStatusParams
	retry bool
	cause string
}

// run reads the batch's instances, decides each one's change outside any
// transaction (a decision may evaluate programs for a second, which must
// not hold a single-writer store's write lock) and writes them with one
// ApplyEach, each guarded by what was read (see inRounds). It returns the
// ids moved and the writes made.
func (b *reopenBatch) run(ctx context.Context) (ids []string, writes []*store.Write, err error) {
	ids = []string{}
	sel := b.selection()
	err = inRounds(ctx, b.p.Limit, func(limit int) (read, wrote int, err error) {
		sel.Limit = limit
		items, err := b.e.st.BatchInstances(ctx, sel)
		if err != nil {
			return 0, 0, err
		}
		ws, err := b.decide(ctx, items)
		if err != nil {
			return 0, 0, err
		}
		written, err := b.e.st.ApplyEach(ctx, ws)
		for i, inst := range written {
			if inst != nil {
				ids, writes, wrote = append(ids, inst.ID), append(writes, ws[i]), wrote+1
			}
		}
		return len(items), wrote, err
	})
	return ids, writes, err
}

// selection is what the batch reads.
func (b *reopenBatch) selection() store.BatchReadParams {
	return store.BatchReadParams{Status: b.p.Status, UpdatedBefore: b.p.UpdatedBefore, IDs: b.p.IDs, Limit: b.p.Limit}
}

// decide decides what the batch writes for each instance as read: its move
// to RUNNING as resume (from PAUSED) or retry (from FAILED or TIMED_OUT;
// the start of a QUEUED one is a retry too) does it (rules.Env.Reopen), in
// one write.
func (b *reopenBatch) decide(ctx context.Context, items []store.BatchItem) ([]*store.Write, error) {
	var ws []*store.Write
	err := b.e.withDefs(ctx, func() error {
		// Run again once a definition is loaded: decided anew.
		ws = make([]*store.Write, 0, len(items))
		now := b.e.clock()
		for _, it := range items {
			id, read := it.Instance.ID, byID(it.Tasks...)
			var c *compiled
			cause := b.p.Cause
			if it.Instance.Definition != "" {
				var err error
				if c, err = b.e.cached(it.Instance); err != nil {
					return err
				}
				if !c.Language.CanRetry() && b.retry {
					return &rules.NotAllowedError{Msg: fmt.Sprintf("cannot retry workflow %s: a Serverless Workflow instance that faulted cannot be retried", id)}
				}
				cause = b.cause
			}
			// The rules change the instance they decide on: a copy.
			inst := *it.Instance
			inst.State = it.Instance.State.Clone()
			d := &decided{id: id, version: it.Instance.Version, from: it.Instance.Status, cause: cause, read: read,
				ch: b.e.rulesFor(ctx).Reopen(c, &inst, byStep(it.Tasks), b.retry, now)}
			d.ch.CancelWithdrawn(copies(it.Tasks))
			// The move releases the tasks a paused instance held.
			d.ch.Hold(d.from, copies(it.Tasks))
			ws = append(ws, d.write(now))
		}
		return nil
	})
	return ws, err
}
