package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The helpers below set up and change instances in tests through the one
// guarded write (Apply), as the engine does: read the instance, decide the
// change, write it guarded by the version read. They are test set-up, not
// a second write path: every rule they rely on is Apply's.

// Replace writes state as the state of instance id, guarded by version: a
// *store.ConflictError carrying the actual version when the instance moved
// on, workflow.ErrTerminal when it is terminal.
func Replace(ctx context.Context, q store.Querier, id string, version int64, state workflow.State, cause string) (*workflow.Instance, error) {
	cur, err := q.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return q.Apply(ctx, &store.Write{ID: id, ExpectedVersion: version, From: cur.Status,
		Status: cur.Status, State: state, Deadline: cur.Deadline, Cause: cause})
}

// Modify reads instance id, lets fn change a copy (store.Modify checks the
// result) and writes it guarded by the version read, reading and deciding
// again when another writer got there first.
func Modify(ctx context.Context, q store.Querier, id string, fn func(*workflow.Instance) error, cause string) (*workflow.Instance, error) {
	for {
		cur, err := q.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := store.Modify(cur, fn)
		if err != nil {
			return nil, err
		}
		out, err := q.Apply(ctx, &store.Write{ID: id, ExpectedVersion: cur.Version, From: cur.Status,
			Status: next.Status, State: next.State, Deadline: next.Deadline, Cause: cause, Prior: &cur.State})
		var conflict *store.ConflictError
		if errors.As(err, &conflict) {
			continue
		}
		return out, err
	}
}

// Transition moves instance p.ID from p.From to p.To: a
// *store.StatusMismatchError when the instance is not at p.From. With
// p.ExpectedVersion the write is guarded by that version (a
// *store.ConflictError when the instance is at another); without, a write
// that lost a race reads and decides again, as the engine's transitions do.
func Transition(ctx context.Context, q store.Querier, p store.TransitionParams) (*workflow.Instance, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	for {
		cur, err := q.Get(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if cur.Status != p.From {
			return nil, &store.StatusMismatchError{ID: p.ID, Expected: p.From, Actual: cur.Status}
		}
		version := cur.Version
		if p.ExpectedVersion != nil {
			version = *p.ExpectedVersion
		}
		out, err := q.Apply(ctx, &store.Write{ID: p.ID, ExpectedVersion: version, From: cur.Status,
			Status: p.To, State: cur.State, Deadline: cur.Deadline, Cause: p.Cause})
		var conflict *store.ConflictError
		if p.ExpectedVersion == nil && errors.As(err, &conflict) {
			continue
		}
		return out, err
	}
}

// StepParams complete a step from outside: StepID of instance ID, guarded
// by ExpectedVersion, with Output (nil is JSON null).
type StepParams struct {
	ID              string
	StepID          string
	Output          json.RawMessage
	ExpectedVersion int64
	Cause           string // default "complete step STEP"
}

// CompleteStep completes p.StepID of instance p.ID with p.Output, guarded
// by p.ExpectedVersion.
func CompleteStep(ctx context.Context, q store.Querier, p StepParams) (*workflow.Instance, error) {
	cur, err := q.Get(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if cur.Status.Terminal() {
		return nil, fmt.Errorf("workflow %q is %s: %w", p.ID, cur.Status, workflow.ErrTerminal)
	}
	state := cur.State.Clone()
	if err := state.CompleteStep(p.StepID, p.Output); err != nil {
		return nil, fmt.Errorf("workflow %q: %w", p.ID, err)
	}
	if p.Cause == "" {
		p.Cause = fmt.Sprintf("complete step %q", p.StepID)
	}
	return q.Apply(ctx, &store.Write{ID: p.ID, ExpectedVersion: p.ExpectedVersion, From: cur.Status,
		Status: cur.Status, State: state, Deadline: cur.Deadline, Cause: p.Cause, Prior: &cur.State})
}
