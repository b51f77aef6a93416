package engine

import (
	"context"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// rulesFor is the engine's rules for one decision made for ctx, which then
// bounds the evaluation of the definition's expressions (foreach). Every
// decision that may evaluate a program gets its rules here.
func (e *Engine) rulesFor(ctx context.Context) rules.Env {
	if hook := e.decideHook.Load(); hook != nil {
		(*hook)(ctx)
	}
	env := e.decide
	env.Ctx = ctx
	return env
}

// readRows reads the task rows of instance id for a decision that needs
// the rows of a foreach step's other iterations (rules.ErrNeedTasks): copies
// of them by rules.TaskKey, and d.read gets them too, so that
// the updates the rules do not guard (a cancel, a re-queue) are written
// only while their rows are as read.
func (e *Engine) readRows(ctx context.Context, q store.Querier, id string, d *decided) (map[string]*store.Task, error) {
	rows, err := q.TasksOfInstance(ctx, id)
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
