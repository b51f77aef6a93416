package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

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
		if !filter.Matches(inst) {
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
