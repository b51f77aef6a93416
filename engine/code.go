package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ErrNonDeterminism: a run of a code workflow asked for an entry under a
// name its journal records with another kind; the workflow failed for
// good (409).
var ErrNonDeterminism = rules.ErrNonDeterminism

// Checkpoint records the outcome of step name of the code workflow run
// holding lease on task taskID, in one versioned write, and returns the
// entry the run must use: the one just recorded, or the one recorded
// before (first write wins; nothing is written then). A lost lease is
// ErrLeaseLost; a name recorded as a sleep or an event fails the workflow
// (ErrNonDeterminism).
func (e *Engine) Checkpoint(ctx context.Context, taskID, lease, name string, rec rules.Recorded) (*workflow.StepState, error) {
	var entry *workflow.StepState
	var nondet error
	out := orNull(rec.Output)
	rec.Output = out
	_, _, _, err := e.leaseHolderOp(ctx, taskID, "", lease, func(*store.Task) string { return rules.CheckpointCause(name, rec.Failed) },
		func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
			ch, st, err := env.Checkpoint(c, inst, t, lease, name, rec, now)
			nondet = nil
			switch {
			case errors.Is(err, rules.ErrNonDeterminism):
				nondet = err
				return ch, nil
			case err != nil:
				return rules.Change{}, err
			}
			entry = st
			if ch.Cause == "" {
				return rules.Change{}, errNothingToWrite
			}
			return ch, nil
		})
	if err == nil && nondet != nil {
		return nil, nondet
	}
	return entry, err
}

// Suspend ends the code workflow run holding lease on task taskID waiting
// for waits (rules.Suspend): a sleep holds no worker, and the first wait
// to finish queues the next run.
func (e *Engine) Suspend(ctx context.Context, taskID, lease string, waits map[string]rules.Wait) error {
	var nondet error
	_, _, _, err := e.leaseHolderOp(ctx, taskID, "", lease, func(*store.Task) string { return "" },
		func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
			ch, err := env.Suspend(c, inst, t, lease, waits, now)
			nondet = nil
			if errors.Is(err, rules.ErrNonDeterminism) {
				nondet = err
				return ch, nil
			}
			return ch, err
		})
	if err == nil && nondet != nil {
		return nondet
	}
	return err
}

// SetVariable is ctx.set of the code workflow run holding lease on task
// taskID: state.variables.KEY = value, one versioned write (none when the
// value is already that).
func (e *Engine) SetVariable(ctx context.Context, taskID, lease, key string, value json.RawMessage) error {
	value = orNull(value)
	_, _, _, err := e.leaseHolderOp(ctx, taskID, "", lease, func(*store.Task) string { return rules.SetCause(key) },
		func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
			ch, err := env.SetVariable(c, inst, t, lease, key, value, now)
			if err == nil && ch.Cause == "" {
				return ch, errNothingToWrite
			}
			return ch, err
		})
	return err
}

// orNull is a step's output as stored: JSON null for none.
func orNull(out json.RawMessage) json.RawMessage {
	if len(out) == 0 {
		return json.RawMessage("null")
	}
	return out
}

// Journal is what a run of a code workflow replays from: its instance's
// state.steps, as JSON.
func Journal(inst *workflow.Instance) json.RawMessage {
	steps := inst.State.Steps
	if steps == nil {
		steps = map[string]*workflow.StepState{}
	}
	raw, err := json.Marshal(steps)
	if err != nil {
		return json.RawMessage("{}")
	}
	return raw
}

// IsRun reports whether t is the run task of a code workflow.
func IsRun(t *Task) bool {
	_, ok := workflow.ParseRunStep(t.Step)
	return ok
}

// withJournal says what kind of task t is and, for a run, gives it its
// journal: from the instance the claim read, else read now.
func (e *Engine) withJournal(ctx context.Context, t *leased) error {
	t.Kind = KindStep
	if !IsRun(&t.Task) {
		return nil
	}
	t.Kind = KindWorkflow
	inst := t.inst
	if inst == nil {
		var err error
		if inst, err = e.st.Get(ctx, t.WorkflowID); err != nil {
			return err
		}
	}
	t.Journal = Journal(inst)
	return nil
}
