package engine

import (
	"context"
	"fmt"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// rulesFor is the engine's rules for one decision made for ctx, which then
// bounds the evaluation of the definition's expressions (foreach).
func (e *Engine) rulesFor(ctx context.Context) rules.Env {
	env := e.decide
	env.Ctx = ctx
	return env
}

// readRows reads the task rows of instance id for a decision that needs
// the rows of a foreach step's other iterations (rules.ErrNeedTasks): the
// rules' view of them by rules.TaskKey, and d.read gets them too, so that
// the updates the rules do not guard (a cancel, a re-queue) are written
// only while their rows are as read.
func (e *Engine) readRows(ctx context.Context, q store.Querier, id string, d *decided) (map[string]*rules.Task, error) {
	rows, err := q.TasksOfInstance(ctx, id, store.LockNone)
	if err != nil {
		return nil, err
	}
	if d.read == nil {
		d.read = map[string]*store.Task{}
	}
	for _, row := range rows {
		if d.read[row.ID] == nil {
			d.read[row.ID] = row
		}
	}
	return byStep(rows), nil
}

// settleStarted writes the second version of an instance that had nothing
// to run once started (a foreach over no items): an instance is never
// created COMPLETED, so it is created RUNNING and settles in the write
// after. Should that write fail, the instance stays RUNNING with every step
// finished and the error says so.
func (e *Engine) settleStarted(ctx context.Context, inst *workflow.Instance, ch *rules.Change) (*workflow.Instance, error) {
	out, err := e.st.Apply(ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
		Status: ch.Settled, State: inst.State, Deadline: inst.Deadline, Cause: ch.SettledCause, Now: e.clock(), Prior: &inst.State})
	if err != nil {
		return nil, fmt.Errorf("workflow %s started with nothing to run, and settling it %s failed: %w", inst.ID, ch.Settled, err)
	}
	return out, nil
}
