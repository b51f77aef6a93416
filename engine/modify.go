package engine

import (
	"context"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ModifyState is the read-modify-write of an instance's state (the API's
// PATCH with If-Match: *): fn gets a copy of the instance as read and
// changes its State (and Status, Deadline: store.Modify checks the
// result), and the change is the engine's one guarded write. It never
// fails for contention alone: a write that lost a race is decided again,
// fn running again on a fresh read (so fn must depend on its argument
// only), and the instance's writers take turns (readDecideApply, locked).
// fn's error is returned unchanged. Errors: store.ErrNotFound,
// workflow.ErrTerminal, workflow.ErrInvalidTransition,
// workflow.ErrInvalidState, fn's own.
func (e *Engine) ModifyState(ctx context.Context, id string, fn func(*workflow.Instance) error, cause string) (*workflow.Instance, error) {
	out, _, _, err := e.readDecideApply(ctx, about(id), func(q store.Querier, now time.Time) (*decided, error) {
		inst, err := q.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := store.Modify(inst, fn)
		if err != nil {
			return nil, err
		}
		d := &decided{id: id, version: inst.Version, from: inst.Status, cause: cause, prior: &inst.State,
			ch: rules.Change{Status: next.Status, State: next.State, Deadline: next.Deadline}}
		if next.Status != inst.Status {
			// A status fn changed stops the instance as a transition does.
			tasks, err := q.TasksOfInstance(ctx, id)
			if err != nil {
				return nil, err
			}
			d.read, d.allRows = byID(tasks...), true
			d.ch.StopTasks(inst.Status, copies(tasks))
		}
		return d, nil
	})
	return out, err
}

// ReplaceState writes state as the state of inst, the instance as its
// caller read it (the API's PATCH with If-Match: "N"), with the engine's
// one guarded write: only while inst is still at its version, else a
// *store.ConflictError. Errors: store.ErrNotFound, workflow.ErrTerminal,
// workflow.ErrInvalidState.
func (e *Engine) ReplaceState(ctx context.Context, inst *workflow.Instance, state workflow.State, cause string) (*workflow.Instance, error) {
	if inst.Status.Terminal() {
		return nil, terminal(inst)
	}
	d := &decided{id: inst.ID, version: inst.Version, from: inst.Status, cause: cause, prior: &inst.State,
		ch: rules.Change{Status: inst.Status, State: state, Deadline: inst.Deadline}}
	return e.st.Apply(ctx, d.write(e.clock()))
}
