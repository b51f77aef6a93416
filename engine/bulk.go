package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
)

// Bulk operations: an action applied to every instance a filter matches.
// The API stores the operation (CreateBulk) and answers at once; the work
// is done by the bulk worker of every node (WorkBulk), in batches, under a
// lease on the record that the node renews with every batch:
//
//  1. The node takes the lease by compare-and-set of the record's version.
//  2. It lists the next page of matches after the record's cursor (newest
//     first, bounded to the instances created before the operation) and
//     writes the page's ids, with the versions listed, into the record as
//     the batch in flight (Pending), before acting.
//  3. It applies the action to each instance with the engine's own guarded
//     write, checking the filter again on every read the write is decided
//     on (an instance that changed meanwhile is read again, never
//     overwritten blindly).
//  4. It moves the cursor past the batch, adds the batch's counts and
//     clears Pending, again by compare-and-set.
//
// A node that dies mid-batch leaves Pending behind; once its lease has
// ended another node takes the record and does the batch again. An
// instance the dead node already changed no longer passes the action (or
// the filter): its history after the version listed tells whether this
// operation changed it (its cause), so it counts as done, once, and the
// counts stay exact.

// bulkBatch is how many instances one batch lists and acts on.
const bulkBatch = 200

// bulkParallel is how many instances of a batch are written at once on a
// store with concurrent writers (one at a time on SQLite, whose writes
// take turns anyway).
const bulkParallel = 8

// MaxBulkLimit bounds BulkParams.Limit.
const MaxBulkLimit = 10_000_000

// bulkApplyAttempts bounds how often a delete is tried again after the
// instance moved under it (the lifecycle actions retry in
// readDecideApply).
const bulkApplyAttempts = 8

// bulkHistoryLook is how many versions after the one listed a taken-over
// batch reads to find this operation's own write of an instance.
const bulkHistoryLook = 50

// BulkParams ask for a bulk operation.
type BulkParams struct {
	Action string
	Filter store.BulkFilter
	Limit  int // 0: every match
}

// BulkError is a bulk operation the API refuses, with every problem.
type BulkError struct{ Problems []string }

func (e *BulkError) Error() string { return strings.Join(e.Problems, "; ") }

// Is makes errors.Is(err, store.ErrInvalidArgument) true.
func (e *BulkError) Is(target error) bool { return target == store.ErrInvalidArgument }

// ErrBulkFinished: a bulk operation that is DONE cannot be cancelled.
var ErrBulkFinished = errors.New("the bulk operation has finished")

// BulkActionProblem is what is wrong with action ("" when it is one of
// store.BulkActions).
func BulkActionProblem(action string) string {
	if slices.Contains(store.BulkActions, action) {
		return ""
	}
	return fmt.Sprintf("unknown action %q: one of %s", action, strings.Join(store.BulkActions, ", "))
}

// Problems lists what is wrong with p.
func (p *BulkParams) Problems() []string {
	var out []string
	if msg := BulkActionProblem(p.Action); msg != "" {
		out = append(out, msg)
	}
	out = append(out, p.Filter.Problems()...)
	if len(out) == 0 {
		// What List itself refuses of the filter, before any I/O.
		lp := p.Filter.ListParams(time.Time{})
		lp.Limit = 1
		if err := lp.Normalize(); err != nil {
			out = append(out, "filter: "+err.Error())
		}
	}
	if p.Limit < 0 || p.Limit > MaxBulkLimit {
		out = append(out, fmt.Sprintf("limit must be from 1 to %d, not %d", MaxBulkLimit, p.Limit))
	}
	return out
}

// CreateBulk stores a RUNNING bulk operation, whose writes record the
// context's actor, and wakes this node's bulk worker. Errors: a *BulkError
// (errors.Is store.ErrInvalidArgument) naming every problem of p.
func (e *Engine) CreateBulk(ctx context.Context, p BulkParams) (*store.BulkOperation, error) {
	if problems := p.Problems(); len(problems) > 0 {
		return nil, &BulkError{Problems: problems}
	}
	op := &store.BulkOperation{
		ID: store.NewID(), Action: p.Action, Filter: p.Filter, Limit: p.Limit,
		Status: store.BulkRunning, Actor: store.WriteActor(ctx, ""),
	}
	out, err := e.st.PutBulk(ctx, op, 0)
	if err != nil {
		return nil, err
	}
	e.bulkSoon()
	return out, nil
}

// GetBulk returns the bulk operation id, or an error wrapping
// store.ErrNotFound.
func (e *Engine) GetBulk(ctx context.Context, id string) (*store.BulkOperation, error) {
	return store.GetBulk(ctx, e.st, id)
}

// ListBulk returns the most recent bulk operations.
func (e *Engine) ListBulk(ctx context.Context, p store.ListBulkParams) ([]*store.BulkOperation, error) {
	return e.st.ListBulk(ctx, p)
}

// CancelBulk stops bulk operation id: its worker stops after the batch in
// flight. Cancelling a CANCELLED one returns it as it is; a DONE one is
// ErrBulkFinished (wrapped); an unknown one store.ErrNotFound.
func (e *Engine) CancelBulk(ctx context.Context, id string) (*store.BulkOperation, error) {
	for {
		op, err := store.GetBulk(ctx, e.st, id)
		if err != nil {
			return nil, err
		}
		switch op.Status {
		case store.BulkCancelled:
			return op, nil
		case store.BulkDone:
			return nil, fmt.Errorf("bulk operation %s is DONE: %w", id, ErrBulkFinished)
		}
		version := op.Version
		finish(op, store.BulkCancelled, e.clock())
		out, err := e.st.PutBulk(ctx, op, version)
		if errors.Is(err, store.ErrConflict) {
			continue // a batch moved it: read it again
		}
		return out, err
	}
}

// finish ends op in status at now.
func finish(op *store.BulkOperation, status string, now time.Time) {
	op.Status = status
	op.FinishedAt = &now
}

// bulkSoon wakes this node's bulk worker.
func (e *Engine) bulkSoon() {
	select {
	case e.bulkWake <- struct{}{}:
	default:
	}
}

// bulkSweepBatch bounds the ended bulk operations one sweep deletes.
const bulkSweepBatch = 100

// deleteEndedBulk deletes bulk operations that ended more than
// store.BulkRetention ago, one batch per sweep: they are few, and only
// kept for GET /v1/bulk/{id} and the dashboard's list.
func (e *Engine) deleteEndedBulk(ctx context.Context) error {
	_, err := e.st.Prune(ctx, store.PruneParams{Kind: store.PruneBulk, Before: e.clock().Add(-store.BulkRetention), Limit: bulkSweepBatch})
	if err != nil {
		return fmt.Errorf("deleting ended bulk operations: %w", err)
	}
	return nil
}
