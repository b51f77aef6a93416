package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
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

// errBulkMismatch is the check of a bulk operation's filter failing on the
// instance as read.
var errBulkMismatch = errors.New("no longer matches the filter")

// bulkCause is the history cause of op's writes: how a node that takes a
// batch over tells the instances op already changed.
func bulkCause(op *store.BulkOperation) string {
	return "bulk " + op.Action + " " + op.ID
}

// bulkOne applies op's action to the instance it, checking op's filter on
// the instance as read. It returns the outcome and, for a failure, its
// message; an error only when the batch must stop (ctx ended, the database
// is unavailable).
func (e *Engine) bulkOne(ctx context.Context, op *store.BulkOperation, it store.BulkItem) (int, string, error) {
	filter := op.Filter.ListParams(op.CreatedAt)
	check := func(inst *workflow.Instance) error {
		if !filter.Matches(inst, searchText(inst)) {
			return errBulkMismatch
		}
		if hook := e.bulkHook.Load(); hook != nil {
			(*hook)(ctx, inst.ID)
		}
		return nil
	}
	var err error
	if op.Action == "delete" {
		err = e.bulkDelete(ctx, it.ID, check)
	} else {
		_, err = e.act(ctx, it.ID, op.Action, bulkCause(op), check)
	}
	switch {
	case err == nil:
		return bulkDone, "", nil
	case ctx.Err() != nil:
		return 0, "", ctx.Err()
	case errors.Is(err, store.ErrUnavailable):
		return 0, "", err
	case errors.Is(err, errBulkMismatch), errors.Is(err, rules.ErrActionNotAllowed), errors.Is(err, workflow.ErrTerminal),
		errors.Is(err, store.ErrNotTerminal), errors.Is(err, store.ErrNotFound):
		// Skipped, unless this operation already changed it (a batch
		// taken over from a node that died in it).
		mine, herr := e.changedBy(ctx, op, it)
		if herr != nil {
			return 0, "", herr
		}
		if mine {
			return bulkDone, "", nil
		}
		return bulkSkipped, "", nil
	default:
		return bulkFailed, err.Error(), nil
	}
}

// changedBy reports whether op wrote the instance it after the version
// listed. A deleted instance's history is gone with it: a delete taken
// over counts the instances gone as skipped.
func (e *Engine) changedBy(ctx context.Context, op *store.BulkOperation, it store.BulkItem) (bool, error) {
	if op.Action == "delete" {
		return false, nil
	}
	h, err := e.st.History(ctx, it.ID, it.Version+1, bulkHistoryLook)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cause := bulkCause(op)
	for _, v := range h {
		if v.Cause == cause {
			return true, nil
		}
	}
	return false, nil
}

// bulkDelete deletes finished instance id while it passes check, at the
// version read: an instance that moved is read and checked again.
func (e *Engine) bulkDelete(ctx context.Context, id string, check func(*workflow.Instance) error) error {
	for range bulkApplyAttempts {
		inst, err := e.st.Get(ctx, id)
		if err != nil {
			return err
		}
		if err := check(inst); err != nil {
			return err
		}
		if err := store.CheckDeletable(id, inst.Status, inst.Version, nil); err != nil {
			return err
		}
		err = e.st.DeleteInstance(ctx, id, &inst.Version)
		if ce := (*store.ConflictError)(nil); errors.As(err, &ce) && ce.Reason == "" {
			continue
		}
		return err
	}
	return fmt.Errorf("workflow %s kept changing under the delete", id)
}

// searchText is inst's search attributes as the filter compares them
// (text: a string as it is, a number or a boolean as JSON writes it).
// Instances carry none yet: a filter by search attribute then matches
// nothing when checked again, so that nothing is changed on a list the
// check cannot confirm. Once they do, this is the one place that reads
// them.
func searchText(*workflow.Instance) map[string]string { return nil }
