package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/flowd/flowd/store"
)

// bulkWorker works off the RUNNING bulk operations at every sweep interval,
// and at once when this node stores one, until ctx ends.
func (e *Engine) bulkWorker(ctx context.Context) {
	t := time.NewTicker(e.sweep)
	defer t.Stop()
	for {
		if err := e.WorkBulk(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("bulk operation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.bulkWake:
		}
	}
}

// WorkBulk works the RUNNING bulk operations that no other node holds,
// each until it ends, its lease is lost or ctx ends.
func (e *Engine) WorkBulk(ctx context.Context) error {
	ops, err := e.st.ListBulk(ctx, store.ListBulkParams{Status: store.BulkRunning, Limit: store.MaxBulkListLimit})
	if err != nil {
		return err
	}
	// Oldest first: they were asked for first. One that fails (its
	// database unavailable for a moment) keeps its lease, and its batch
	// is done again; the others go on.
	slices.Reverse(ops)
	var errs []error
	for _, op := range ops {
		if err := e.workBulk(ctx, op); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("bulk operation %s: %w", op.ID, err))
		}
	}
	return errors.Join(errs...)
}

// workBulk takes op's lease, when it is free or this node's, and works op
// batch by batch.
func (e *Engine) workBulk(ctx context.Context, op *store.BulkOperation) error {
	now := e.clock()
	if op.LeaseOwner != e.node && op.LeaseUntil.After(now) {
		return nil // another node works it
	}
	op.LeaseOwner, op.LeaseUntil = e.node, now.Add(e.lease)
	op, err := e.st.PutBulk(ctx, op, op.Version)
	if errors.Is(err, store.ErrConflict) {
		return nil // another node took it, or it was cancelled
	}
	if err != nil {
		return err
	}
	// The instances' writes are the requester's.
	ctx = store.WithActor(ctx, op.Actor)
	id := op.ID
	for op != nil && op.Status == store.BulkRunning && ctx.Err() == nil {
		if op, err = e.bulkBatch(ctx, op); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		// A node shutting down gives its lease back: another node takes
		// the operation over now, not once the lease has run out (the
		// batch in flight, if any, is done again there).
		e.releaseBulk(context.WithoutCancel(ctx), id)
	}
	return err
}

// releaseBulk ends this node's lease of bulk operation id, when it still
// holds it; a write that misses leaves the record to whoever moved it.
func (e *Engine) releaseBulk(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	op, err := store.GetBulk(ctx, e.st, id)
	if err != nil || op.LeaseOwner != e.node || op.Status != store.BulkRunning {
		return
	}
	op.LeaseUntil = e.clock()
	if _, err := e.st.PutBulk(ctx, op, op.Version); err == nil {
		e.log.Info("bulk operation handed back", "bulk", id, "node", e.node)
	}
}

// bulkBatch lists the next batch when none is in flight, records it,
// works it, and records its outcome. It returns the record as stored, or
// nil when this node no longer holds it.
func (e *Engine) bulkBatch(ctx context.Context, op *store.BulkOperation) (*store.BulkOperation, error) {
	if len(op.Pending) == 0 {
		remaining := bulkBatch
		if op.Limit > 0 {
			remaining = min(remaining, op.Limit-op.Done)
		}
		if op.Exhausted || remaining <= 0 {
			return e.putBulkOutcome(ctx, op, bulkTally{}, true)
		}
		p := op.Filter.ListParams(op.CreatedAt)
		p.Cursor, p.Limit = op.Cursor, remaining
		page, err := e.st.List(ctx, p)
		if err != nil {
			return nil, err
		}
		if len(page.Instances) == 0 {
			return e.putBulkOutcome(ctx, op, bulkTally{}, true)
		}
		op.Pending = make([]store.BulkItem, len(page.Instances))
		for i, inst := range page.Instances {
			op.Pending[i] = store.BulkItem{ID: inst.ID, Version: inst.Version}
		}
		last := page.Instances[len(page.Instances)-1]
		op.PendingCursor = store.EncodeCursor(store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID})
		op.Exhausted = page.NextCursor == ""
		op.LeaseUntil = e.clock().Add(e.lease)
		if op, err = e.st.PutBulk(ctx, op, op.Version); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, nil // cancelled, or taken over: the batch is not this node's
			}
			return nil, err
		}
	}
	tally, err := e.bulkItems(ctx, op)
	if err != nil {
		// Nothing of the batch is recorded: it is done again, by this
		// node or, after the lease, another.
		return nil, err
	}
	limitReached := op.Limit > 0 && op.Done+tally.done >= op.Limit
	return e.putBulkOutcome(ctx, op, tally, op.Exhausted || limitReached)
}

// bulkItems applies op's action to the batch in flight, bulkParallel
// instances at a time (each is a write of its own, guarded by itself), and
// tallies the outcomes in the batch's order.
func (e *Engine) bulkItems(ctx context.Context, op *store.BulkOperation) (bulkTally, error) {
	type result struct {
		outcome int
		msg     string
		err     error
	}
	results := make([]result, len(op.Pending))
	parallel := 1
	if e.st.Capabilities().ConcurrentWriters {
		parallel = bulkParallel
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(op.Pending)) {
		wg.Go(func() {
			for i := range next {
				r := &results[i]
				r.outcome, r.msg, r.err = e.bulkOne(ctx, op, op.Pending[i])
			}
		})
	}
	for i := range op.Pending {
		next <- i
	}
	close(next)
	wg.Wait()
	var tally bulkTally
	for i, r := range results {
		if r.err != nil {
			return bulkTally{}, r.err
		}
		tally.add(op.Pending[i].ID, r.outcome, r.msg)
	}
	return tally, nil
}

// The outcomes of one instance of a bulk operation.
const (
	bulkDone = iota
	bulkSkipped
	bulkFailed
)

// bulkTally is what a batch did.
type bulkTally struct {
	done, skipped, failed int
	errors                []store.BulkError
}

func (t *bulkTally) add(id string, outcome int, msg string) {
	switch outcome {
	case bulkDone:
		t.done++
	case bulkSkipped:
		t.skipped++
	default:
		t.failed++
		t.errors = append(t.errors, store.BulkError{WorkflowID: id, Error: msg})
	}
}

// putBulkOutcome records the batch in flight as worked (t), the cursor past
// it, and, when last, the end of op. When the record moved meanwhile: a
// cancel keeps the batch's counts; a node that took the record over (this
// one's lease ended) does the batch again and counts it itself.
func (e *Engine) putBulkOutcome(ctx context.Context, op *store.BulkOperation, t bulkTally, last bool) (*store.BulkOperation, error) {
	for range bulkApplyAttempts {
		pending := op.Pending
		next := *op
		next.Matched += t.done + t.skipped + t.failed
		next.Done += t.done
		next.Skipped += t.skipped
		next.Failed += t.failed
		for _, be := range t.errors {
			if len(next.Errors) < store.MaxBulkErrors {
				next.Errors = append(next.Errors, be)
			}
		}
		if len(pending) > 0 {
			next.Cursor = op.PendingCursor
		}
		next.Pending, next.PendingCursor = nil, ""
		now := e.clock()
		next.LeaseUntil = now.Add(e.lease)
		if last && next.Status == store.BulkRunning {
			finish(&next, store.BulkDone, now)
		}
		out, err := e.st.PutBulk(ctx, &next, op.Version)
		if !errors.Is(err, store.ErrConflict) {
			if err == nil && out.Status != store.BulkRunning {
				e.log.Info("bulk operation ended", "bulk", out.ID, "status", out.Status, "action", out.Action,
					"matched", out.Matched, "done", out.Done, "skipped", out.Skipped, "failed", out.Failed)
			}
			return out, err
		}
		fresh, err := store.GetBulk(ctx, e.st, op.ID)
		if err != nil {
			return nil, err
		}
		if fresh.LeaseOwner != e.node || !slices.Equal(fresh.Pending, pending) {
			return nil, nil // taken over
		}
		op = fresh // cancelled meanwhile: its counts still take the batch
	}
	return nil, nil
}
