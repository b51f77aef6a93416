package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/api"
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
	err := e.runRequest(ctx, taskID, lease, func(*store.Task) string { return rules.CheckpointCause(name, rec.Failed) },
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

// leaseDecision is one of the rules deciding a lease holder's request on
// its instance and task row.
type leaseDecision func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error)

// runRequest writes a run's checkpoint or set: decided on the instance as
// the run's last write left it, without reading it (onCursor), when that
// holds; else read, decided and written (leaseHolderOp), which also says
// why a request fails. Either way the run's cursor is left as the write
// left the instance.
func (e *Engine) runRequest(ctx context.Context, taskID, lease string, cause func(*store.Task) string, decide leaseDecision) error {
	if e.onCursor(ctx, taskID, lease, decide) {
		return nil
	}
	written, ch, _, err := e.leaseHolderOp(ctx, taskID, "", lease, cause, decide)
	switch {
	case err != nil || ch == nil:
		e.runs.drop(taskID)
	case len(ch.Update) == 1 && ch.Update[0].Task.ID == taskID:
		e.runs.put(written, &ch.Update[0].Task, ch.StateLen)
	}
	return err
}

// onCursor makes a run's request one guarded write decided on its cursor
// (runCursors), through the committers when they run, so that it shares
// their commit, and reports whether it was made: false when there is no
// cursor, when the decision does more than record (a failure of the
// rules, a non-determinism that fails the workflow, a stop), or when the
// write did not land (a conflict): nothing was written then, and the
// caller reads and decides again. decide's errNothingToWrite (an entry
// recorded before) is made, with nothing written.
func (e *Engine) onCursor(ctx context.Context, taskID, lease string, decide leaseDecision) bool {
	cur := e.runs.get(taskID, lease)
	if cur == nil {
		return false
	}
	c, err := e.cached(cur.inst)
	if err != nil {
		return false
	}
	nothing := false
	decideOn := func(inst *workflow.Instance, now time.Time) *completion {
		work, row := shallowWork(inst), cur.row
		env := e.rulesFor(ctx)
		if inst == cur.inst {
			// The length is known of the cursor's state alone (the
			// committers may decide again on another).
			env.StateLen = cur.stateLen
		}
		ch, err := decide(env, c, work, &row, now)
		nothing = errors.Is(err, errNothingToWrite)
		// A search attribute is written by Apply alone (the committers'
		// group writes refuse it), on the instance as read (the cursor's
		// does not show its attributes).
		if err != nil || ch.Cause == "" || len(ch.Search) > 0 || len(ch.Update) != 1 || len(ch.Insert) > 0 || len(ch.Withdrawn) > 0 ||
			ch.Settled != "" || ch.Status != inst.Status || work.Status != inst.Status || ch.HoldsChange(inst.Status) {
			return nil
		}
		d := &decided{id: inst.ID, version: inst.Version, from: inst.Status, ch: ch, cause: ch.Cause, prior: &inst.State}
		return &completion{work: work, ch: d.ch, w: d.write(now)}
	}
	cp := decideOn(cur.inst, e.clock())
	if nothing {
		return true
	}
	if cp == nil {
		return false
	}
	res := e.applyCompletion(ctx, cp, decideOn)
	if res.redecided != nil {
		cp = res.redecided
	}
	if res.err != nil {
		// Read and decided again, which also finds a write that landed
		// with its answer lost.
		e.runs.drop(taskID)
		return false
	}
	if cp.ch.Notify {
		e.wake()
	}
	e.runs.put(res.inst, cp.w.Update[0].Task, cp.w.StateLen)
	return true
}

// Suspend ends the code workflow run holding lease on task taskID waiting
// for waits (rules.Suspend): a sleep holds no worker, and the first wait
// to finish queues the next run.
func (e *Engine) Suspend(ctx context.Context, taskID, lease string, waits map[string]rules.Wait) error {
	var nondet error
	// The run ends here, whatever the outcome.
	e.runs.drop(taskID)
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
	return e.runRequest(ctx, taskID, lease, func(*store.Task) string { return rules.SetCause(key) },
		func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
			ch, err := env.SetVariable(c, inst, t, lease, key, value, now)
			if err == nil && ch.Cause == "" {
				return ch, errNothingToWrite
			}
			return ch, err
		})
}

// SetSearch is ctx.search of the code workflow run holding lease on task
// taskID: the instance's search attribute NAME = value, one versioned
// write (none when the instance already shows that value).
func (e *Engine) SetSearch(ctx context.Context, taskID, lease, name string, value json.RawMessage) error {
	return e.runRequest(ctx, taskID, lease, func(*store.Task) string { return rules.SearchCause(name) },
		func(env rules.Env, c *compiled, inst *workflow.Instance, t *store.Task, now time.Time) (rules.Change, error) {
			ch, err := env.SetSearch(c, inst, t, lease, name, value, now)
			if err == nil && ch.Cause == "" {
				return ch, errNothingToWrite
			}
			return ch, err
		})
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
	// The run's first checkpoint is decided on the instance the claim read.
	e.runs.put(inst, t.row, 0)
	if inst == nil {
		var err error
		if inst, err = e.st.Get(ctx, t.WorkflowID); err != nil {
			return err
		}
	}
	t.Journal = Journal(inst)
	return nil
}

// RecordedOf is a checkpoint's body as the rules take it: its output, or
// its error (a string, or an object's message) after its attempts. A body
// with both, or negative attempts, is store.ErrInvalidArgument.
func RecordedOf(req api.CheckpointRequest) (rules.Recorded, error) {
	if req.Attempts < 0 {
		return rules.Recorded{}, fmt.Errorf("%w: \"attempts\" must not be negative", store.ErrInvalidArgument)
	}
	rec := rules.Recorded{Output: req.Output, Attempts: req.Attempts}
	if e := bytes.TrimSpace(req.Error); len(e) > 0 && string(e) != "null" {
		// A null output, as a null error, is none.
		if out := bytes.TrimSpace(req.Output); len(out) > 0 && string(out) != "null" {
			return rules.Recorded{}, fmt.Errorf("%w: a step has \"output\" or \"error\", not both", store.ErrInvalidArgument)
		}
		rec.Failed, rec.Error = true, api.ErrorMessage(e)
	}
	return rec, nil
}

// WaitsOf are a suspend's waits as the rules take them; a wait that is
// not one of a sleep, an event or a child, or whose values are not valid,
// is store.ErrInvalidArgument naming it.
func WaitsOf(waits map[string]api.Wait) (map[string]rules.Wait, error) {
	if len(waits) == 0 {
		return nil, fmt.Errorf("%w: \"waits\" must name at least one thing the run waits for", store.ErrInvalidArgument)
	}
	out := make(map[string]rules.Wait, len(waits))
	for name, w := range waits {
		wait, err := waitOf(name, w)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", store.ErrInvalidArgument, err)
		}
		out[name] = wait
	}
	return out, nil
}

func waitOf(name string, wt api.Wait) (rules.Wait, error) {
	if err := workflow.ValidateStepKey(name); err != nil {
		return rules.Wait{}, fmt.Errorf("waits: %v", err)
	}
	set := 0
	for _, given := range []bool{wt.Sleep != nil, wt.Event != nil, wt.Child != nil} {
		if given {
			set++
		}
	}
	switch {
	case set > 1:
		return rules.Wait{}, fmt.Errorf("waits.%s: a wait is one of a sleep, an event or a child", name)
	case wt.Timeout != nil && wt.Event == nil:
		return rules.Wait{}, fmt.Errorf("waits.%s.timeout: only an event wait has a timeout", name)
	case wt.Child != nil:
		if err := workflow.ValidateDefinitionName(wt.Child.Definition); err != nil {
			return rules.Wait{}, fmt.Errorf("waits.%s.child.definition: %v", name, err)
		}
		return rules.Wait{Child: wt.Child.Definition, ChildInput: wt.Child.Input}, nil
	case wt.Sleep != nil:
		d, err := time.ParseDuration(*wt.Sleep)
		if err != nil || d < 0 {
			return rules.Wait{}, fmt.Errorf(`waits.%s.sleep: %q is not a duration such as "10s", "5m" or "1h30m"`, name, *wt.Sleep)
		}
		return rules.Wait{Sleep: d}, nil
	case wt.Event != nil:
		if p := workflow.EventNameProblem(*wt.Event); p != "" {
			return rules.Wait{}, fmt.Errorf("waits.%s.event %s", name, p)
		}
		if len([]rune(wt.Key)) > workflow.MaxEventKeyLength {
			return rules.Wait{}, fmt.Errorf("waits.%s.key is longer than %d characters", name, workflow.MaxEventKeyLength)
		}
		wait := rules.Wait{Event: *wt.Event, Key: wt.Key}
		if wt.Timeout != nil {
			d, err := time.ParseDuration(*wt.Timeout)
			if err != nil || d <= 0 {
				return rules.Wait{}, fmt.Errorf(`waits.%s.timeout: %q is not a positive duration such as "10s", "5m" or "1h30m"`, name, *wt.Timeout)
			}
			wait.Timeout = d
		}
		return wait, nil
	}
	return rules.Wait{}, fmt.Errorf(`waits.%s: say what the run waits for: {"sleep": "10s"}, {"event": "name", "key": "..."} or {"child": {"definition": "name", "input": {}}}`, name)
}
