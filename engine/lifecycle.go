package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// StartParams start an instance of a definition.
type StartParams struct {
	ID         string // optional client id
	Definition string
	Revision   int // 0: the latest
	Input      json.RawMessage
	// State, when set, gives the new instance's variables and other
	// top-level keys; its steps come from the definition, so State.Steps
	// must be empty (ErrInvalidArgument otherwise).
	State *workflow.State
	// IdempotencyKey and RequestHash, when the key is set, are recorded
	// with the instance (store.CreateParams); a live key returns a
	// *store.IdempotencyKeyError and starts nothing.
	IdempotencyKey string
	RequestHash    string
	// write, when set, stores the start instead of the engine's own create:
	// a schedule's fire writes it with the schedule's advance
	// (schedules.go). It returns the instance, or an error.
	write func(ctx context.Context, p store.CreateParams) (*workflow.Instance, error)
	// Priority (1–5) overrides the definition's; 0 keeps it.
	Priority int
	// Search are search attributes of the start's, over the definition's
	// of the same name (see store.CreateParams.Search).
	Search map[string]json.RawMessage

	// rerun, when set, starts the instance as a re-run (Rerun): with the
	// step records it keeps, linked to the instance it re-runs, under its
	// own history cause.
	rerun *rerunStart
}

// rerunStart is what a re-run adds to a start.
type rerunStart struct {
	of    string
	steps map[string]*workflow.StepState
	cause string
}

// StartWorkflow creates a RUNNING instance with every step in its state and
// schedules the steps without dependencies in the same write.
// An unknown definition returns an error wrapping store.ErrNotFound.
func (e *Engine) StartWorkflow(ctx context.Context, p StartParams) (*workflow.Instance, error) {
	// The latest revision this node knows is used without reading it; the
	// write checks that it still is the latest. When another node stored a
	// newer one, the start reads it and tries again.
	for range 3 {
		c := e.knownLatest(p.Definition)
		if p.Revision != 0 || c == nil {
			break
		}
		inst, err := e.createInstance(ctx, c, p, true)
		if !errors.Is(err, store.ErrStaleRevision) {
			return inst, err
		}
		if _, err := e.compiled(ctx, p.Definition, 0); err != nil {
			return nil, err
		}
	}
	c, err := e.compiled(ctx, p.Definition, p.Revision)
	if err != nil {
		return nil, err
	}
	return e.createInstance(ctx, c, p, false)
}

// createInstance starts an instance of c; under latest only while c is the
// latest revision of its definition (store.ErrConflict otherwise).
func (e *Engine) createInstance(ctx context.Context, c *compiled, p StartParams, latest bool) (*workflow.Instance, error) {
	if p.ID == "" {
		p.ID = store.NewID()
	}
	input := bytes.TrimSpace(p.Input)
	if len(input) == 0 || string(input) == "null" {
		input = []byte("{}")
	}
	if !json.Valid(input) {
		return nil, fmt.Errorf("%w: input is not valid JSON", store.ErrInvalidArgument)
	}
	inst := &workflow.Instance{ID: p.ID, State: c.Def.InitialState(), Input: input, Priority: c.Def.PriorityOrDefault()}
	if p.Priority != 0 {
		if msg := workflow.PriorityProblem(p.Priority); msg != "" {
			return nil, fmt.Errorf("%w: priority %s", store.ErrInvalidArgument, msg)
		}
		inst.Priority = p.Priority
	}
	if p.State != nil {
		if len(p.State.Steps) > 0 {
			return nil, fmt.Errorf("%w: state.steps cannot be given with a definition: its steps are the definition's", store.ErrInvalidArgument)
		}
		inst.State.Variables, inst.State.Extra = p.State.Variables, p.State.Extra
	}
	if p.rerun != nil {
		inst.State.Steps = p.rerun.steps
	}
	ch, err := e.rulesFor(ctx).Start(c, inst, e.clock())
	if err != nil {
		return nil, err
	}
	if p.rerun != nil {
		ch.Cause = p.rerun.cause
	}
	slot, err := slotOf(c, input, e.maxState)
	if err != nil {
		return nil, err
	}
	search, err := searchOf(c, input, p.Search, e.maxState)
	if err != nil {
		return nil, err
	}
	// One write: the instance, its history row, its first tasks, the NOTIFY.
	ch.Hold(ch.Status, nil)
	tasks := insertRows(ch.Insert)
	cp := store.CreateParams{
		ID: p.ID, Definition: c.Def.Name, DefinitionRevision: c.Def.Revision, Status: ch.Status,
		Input: input, State: ch.State, Deadline: ch.Deadline, Cause: ch.Cause,
		Tasks: tasks, Notify: ch.Notify, LatestRevision: latest,
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash, Priority: inst.Priority,
		Concurrency: slot, TraceParent: e.traceParentOf(ctx), Search: search,
	}
	if p.rerun != nil {
		cp.RerunOf = p.rerun.of
	}
	write := e.create
	if p.write != nil {
		write = p.write
	}
	out, err := write(ctx, cp)
	if slot != nil && errors.Is(err, store.ErrConcurrencyLimit) {
		// No free slot: the definition's strategy decides. Its writes
		// are the engine's own: a schedule's fire refused here has not
		// advanced the schedule, whose next pass finds the instance id
		// taken and counts the fire as done.
		return e.startOverLimit(ctx, c, cp)
	}
	if err != nil {
		return nil, err
	}
	if ch.Settled != "" {
		return e.completeAtStart(ctx, out, &ch)
	}
	if ch.Notify {
		e.wake()
	}
	e.takeEvents(ctx, out, &store.Write{Insert: tasks})
	return out, nil
}

// Actions are the lifecycle actions of the API.
var Actions = rules.Actions

// Action performs cancel, pause, resume or retry on any instance. For a
// definition-based instance, resume schedules what became ready while paused,
// retry re-queues failed (and interrupted) steps with a fresh attempt budget
// and a new workflow timeout, and cancel releases the instance's tasks.
// ErrActionNotAllowed (wrapped) when the current status does not allow it.
//
// An instance whose steps all finished while it was paused (or, for retry,
// stopped) resumes and settles in the same transaction: two versions, the
// first RUNNING, the second COMPLETED or FAILED (PAUSED → COMPLETED is not a
// transition of its own).
func (e *Engine) Action(ctx context.Context, id, action string) (*workflow.Instance, error) {
	if !rules.IsAction(action) {
		return nil, fmt.Errorf("%w: unknown action %q", store.ErrInvalidArgument, action)
	}
	return e.act(ctx, id, action, action, nil)
}

// Transition moves the instance from one status to another as POST
// /v1/workflows/{id}/status asks: only when it is from (a
// *store.StatusMismatchError otherwise) and the transition is allowed
// (workflow.ErrInvalidTransition). A transition that is one of the actions
// (to CANCELLED, RUNNING → PAUSED, PAUSED → RUNNING, FAILED or TIMED_OUT →
// RUNNING) does what the action does, so a definition-based instance goes on
// running; the others change the status alone.
func (e *Engine) Transition(ctx context.Context, id string, from, to workflow.Status) (*workflow.Instance, error) {
	p := store.TransitionParams{ID: id, From: from, To: to}
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if action, ok := rules.ActionFor(from, to); ok {
		return e.act(ctx, id, action, p.Cause, statusIs(from))
	}
	if from == workflow.StatusQueued && to == workflow.StatusRunning {
		// A QUEUED instance starts as the engine starts it: with its first
		// tasks, if its key has a free slot.
		return e.startQueuedNow(ctx, id)
	}
	return e.setStatus(ctx, id, from, to, p.Cause)
}

// setStatus moves instance id from status from to to, the status alone
// (rules.SetStatus), with the engine's one guarded write: a status that
// stops the instance cancels its tasks and, for a child workflow, carries
// its outcome to the parent's step in the same write (applyWithParent).
// An instance that is not from is a *store.StatusMismatchError.
func (e *Engine) setStatus(ctx context.Context, id string, from, to workflow.Status, cause string) (*workflow.Instance, error) {
	var out *workflow.Instance
	err := e.withDefs(ctx, func() error {
		var err error
		out, _, _, err = e.readDecideApply(ctx, about(id), func(q store.Querier, now time.Time) (*decided, error) {
			inst, err := q.Get(ctx, id)
			if err != nil {
				return nil, err
			}
			if inst.Status != from {
				return nil, &store.StatusMismatchError{ID: inst.ID, Expected: from, Actual: inst.Status}
			}
			tasks, err := q.TasksOfInstance(ctx, id)
			if err != nil {
				return nil, err
			}
			d := &decided{id: id, version: inst.Version, from: inst.Status, cause: cause, read: byID(tasks...), allRows: true}
			d.ch = rules.SetStatus(inst, to, copies(tasks))
			return d, nil
		})
		return err
	})
	return out, err
}

// statusIs is the check of act that the instance is from: a
// *store.StatusMismatchError otherwise.
func statusIs(from workflow.Status) func(*workflow.Instance) error {
	return func(inst *workflow.Instance) error {
		if inst.Status != from {
			return &store.StatusMismatchError{ID: inst.ID, Expected: from, Actual: inst.Status}
		}
		return nil
	}
}

// act performs action; when check is set, only on an instance that passes
// it (its error is returned as it is), checked on every read the decision
// is made on. It reads the instance and its tasks, lets the rules decide
// (rules.Env.Act; a cancel also releases the instance's active tasks,
// rules.CancelTasks) and writes the version (and the settled one) with one
// guarded store.Apply at the version read, deciding and checking again on
// a fresh read when something moved.
func (e *Engine) act(ctx context.Context, id, action, cause string, check func(*workflow.Instance) error) (*workflow.Instance, error) {
	var out *workflow.Instance
	var ch *rules.Change
	err := e.withDefs(ctx, func() error {
		var err error
		out, _, ch, err = e.readDecideApply(ctx, about(id), func(q store.Querier, now time.Time) (*decided, error) {
			inst, err := q.Get(ctx, id)
			if err != nil {
				return nil, err
			}
			if inst.Status.Terminal() {
				return nil, terminal(inst)
			}
			if check != nil {
				if err := check(inst); err != nil {
					return nil, err
				}
			}
			c, err := e.definitionOf(inst)
			if err != nil {
				return nil, err
			}
			var tasks []*store.Task
			allRows := action == "resume" || action == "retry" || action == "cancel"
			if allRows {
				if tasks, err = q.TasksOfInstance(ctx, id); err != nil {
					return nil, err
				}
			}
			d := &decided{id: id, version: inst.Version, from: inst.Status, cause: cause, read: byID(tasks...), allRows: allRows}
			if d.ch, err = e.rulesFor(ctx).Act(c, inst, action, byStep(tasks), now); err != nil {
				return nil, err
			}
			// A cancel (or a resume that settles FAILED) stops the
			// instance: its active tasks are cancelled in the write.
			d.ch.StopTasks(d.from, copies(tasks))
			return d, nil
		})
		return err
	})
	var na *rules.NotAllowedError
	if errors.As(err, &na) {
		return nil, na // without the store's wrapping: the message is for people
	}
	var mismatch *store.StatusMismatchError
	if errors.As(err, &mismatch) {
		return nil, mismatch
	}
	if errors.Is(err, store.ErrConcurrencyLimit) {
		// A retry (FAILED or TIMED_OUT → RUNNING) needs a slot of its key.
		return nil, fmt.Errorf("cannot %s workflow %s: %w: every slot of its concurrency key is held by a RUNNING or PAUSED instance; try again when one finishes", action, id, store.ErrConcurrencyLimit)
	}
	if err != nil {
		return nil, err
	}
	if ch.Notify {
		e.wake()
	}
	if out.Status == workflow.StatusCancelled {
		// Its descendants are the sweepers' (cascade.go): the cancel
		// answers now, however many there are.
		e.cascadeSoon()
	}
	return out, nil
}

// CompleteStepParams complete a step from outside (the API).
type CompleteStepParams struct {
	ID     string
	Step   string
	Output json.RawMessage
	// ExpectedVersion, when set, must equal the instance's version.
	ExpectedVersion *int64
}

// CompleteStep completes a step from outside. On a definition-based instance a
// WAITING step may be completed, and a RUNNING (or FAILED) task step as a
// manual override — its outstanding lease is revoked; a PENDING step is
// refused (ErrStepNotReady). The instance then moves on as it would after a
// task completion. Free-form instances use the store's CompleteStep.
// Errors: store.ErrNotFound, workflow.ErrUnknownStep, workflow.ErrTerminal,
// workflow.ErrStepCompleted, ErrStepNotReady, *store.ConflictError.
func (e *Engine) CompleteStep(ctx context.Context, p CompleteStepParams) (*workflow.Instance, error) {
	output := bytes.TrimSpace(p.Output)
	if len(output) == 0 {
		output = []byte("null")
	}
	if !json.Valid(output) {
		return nil, fmt.Errorf("%w: output is not valid JSON", store.ErrInvalidArgument)
	}
	var out *workflow.Instance
	var ch *rules.Change
	err := e.withDefs(ctx, func() error {
		var err error
		// A stale ExpectedVersion is the decision's own error, returned to
		// the caller; a write that conflicts is decided again, and then
		// refused by that check if the version moved.
		out, _, ch, err = e.readDecideApply(ctx, about(p.ID), func(q store.Querier, now time.Time) (*decided, error) {
			inst, err := q.Get(ctx, p.ID)
			if err != nil {
				return nil, err
			}
			if inst.Status.Terminal() {
				return nil, terminal(inst)
			}
			tasks, err := q.TasksOfInstance(ctx, p.ID)
			if err != nil {
				return nil, err
			}
			ec := rules.ExternalCompletion{Step: p.Step, Output: json.RawMessage(output), ExpectedVersion: p.ExpectedVersion}
			for _, t := range tasks {
				if t.StepID == p.Step {
					v := *t
					ec.Task = &v
				}
			}
			c, err := e.definitionOf(inst)
			if err != nil {
				return nil, err
			}
			d := &decided{id: p.ID, version: inst.Version, from: inst.Status, cause: rules.CompleteStepCause(p.Step), read: byID(tasks...)}
			// A foreach step's iterations are cancelled with it: the rules
			// see every row.
			env := e.rulesFor(ctx)
			env.Tasks = byStep(tasks)
			d.ch, err = env.CompleteStep(c, inst, ec, now)
			var stale *rules.VersionMismatchError
			if errors.As(err, &stale) {
				return nil, &store.ConflictError{ID: stale.ID, Expected: stale.Expected, Actual: stale.Actual}
			}
			if err != nil {
				return nil, err
			}
			// The tasks are read: the withdrawn steps' ones are cancelled.
			d.ch.CancelWithdrawn(copies(tasks))
			return d, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if ch.Notify {
		e.wake()
	}
	return out, nil
}
