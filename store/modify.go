package store

import (
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/workflow"
)

// Modify is the decision of a read-modify-write of an instance (the
// engine's ModifyState), written once so that every writer gives fn the same
// thing and checks its result the same way: cur is the instance as read.
// fn gets a copy of it, so that a failed fn leaves nothing behind and
// an fn that keeps references into its argument cannot change what the
// backend stores; the copy's State, Status and Deadline, checked, are
// returned as the instance to write (version and times are the store's).
// Errors: ErrInvalidArgument for a nil fn; workflow.ErrTerminal;
// fn's own error, unchanged; workflow.ErrInvalidTransition;
// workflow.ErrInvalidState.
func Modify(cur *workflow.Instance, fn func(*workflow.Instance) error) (*workflow.Instance, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil update function", ErrInvalidArgument)
	}
	if cur.Status.Terminal() {
		return nil, fmt.Errorf("workflow %q is %s: %w", cur.ID, cur.Status, workflow.ErrTerminal)
	}
	work := *cur
	work.State = cur.State.Clone()
	if cur.Deadline != nil {
		d := *cur.Deadline
		work.Deadline = &d
	}
	work.Input = append(json.RawMessage(nil), cur.Input...)
	if err := fn(&work); err != nil {
		return nil, err // the caller's own error, as it made it
	}
	// Only these fields are the caller's to change; the state is copied
	// once more because fn may keep references into its argument.
	out := *cur
	out.State, out.Status, out.Deadline = work.State.Clone(), work.Status, work.Deadline
	if out.Status != cur.Status && !workflow.CanTransition(cur.Status, out.Status) {
		return nil, fmt.Errorf("workflow %q: %w: %s → %s", cur.ID, workflow.ErrInvalidTransition, cur.Status, out.Status)
	}
	StopSteps(cur.Status, out.Status, &out.State)
	if err := out.State.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}
