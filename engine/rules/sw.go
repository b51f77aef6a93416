package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

// Serverless Workflow instances. The interpreter (package sw) is a pure
// state machine kept in the instance's state under SWStateKey; everything
// it waits for is an item, and each pending item is one task row (step id
// = item id) and one entry of state.steps (RUNNING, or WAITING for an
// event), so that leases, fencing, deliveries, timeouts and the sweeper
// treat it as any step. A finished row resumes the machine, which decides
// the next version: one per finished task. The rules reach all this
// through the instances' Language, serverless (serverless.go).

// SWStateKey is the top-level key of an instance's state that holds the
// interpreter's runtime.
const SWStateKey = workflow.ServerlessStateKey

// The engine-served queues of Serverless Workflow items besides store.QueueChild
// and the event queues: store.QueueTick holds pure tasks to evaluate and wait
// timers (claimable only while the instance is RUNNING, so a paused
// instance evaluates nothing), store.QueueSWCall the http and openapi calls,
// store.QueueSWEmit the events to publish.

// SWKeyOf is the key, in the state.steps entry of a call's item that a
// try's retry issued again, of the id of the call's first item: the task
// keeps that item's idempotency key (IdempotencyKey).
const SWKeyOf = "idempotency_key_of"

// swAttempts is the attempt budget of an item's row: a lost worker's
// delivery runs again, a failure reported by a handler does not (the
// workflow's try/catch retries).
const swAttempts = workflow.DefaultMaxAttempts

// SWCallResult is what the engine's run of an http, openapi or emit item
// completes its task with: the item's output, or the DSL error it raised.
type SWCallResult struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  *sw.Error       `json:"error,omitempty"`
}

// SWRuntime decodes the interpreter's runtime from inst's state.
func SWRuntime(state workflow.State) (*sw.Runtime, error) {
	raw, ok := state.Extra[SWStateKey]
	if !ok {
		return nil, fmt.Errorf("%w: the state has no %q runtime", workflow.ErrInvalidState, SWStateKey)
	}
	var rt sw.Runtime
	if err := json.Unmarshal(raw, &rt); err != nil {
		return nil, fmt.Errorf("%w: state.%s: %w", workflow.ErrInvalidState, SWStateKey, err)
	}
	return &rt, nil
}

// swPending returns the pending item id of rt, if any.
func swPending(rt *sw.Runtime, id string) (sw.Item, bool) {
	it, ok := rt.Items[id]
	return it, ok
}

func (env Env) swEnv(inst *workflow.Instance, now time.Time) sw.Env {
	started := inst.CreatedAt
	if started.IsZero() {
		started = now
	}
	return sw.Env{Now: now, WorkflowID: inst.ID, StartedAt: started, RawInput: inst.Input, MaxStateBytes: env.MaxStateBytes}
}

// resume resumes the machine with the outcome of item t.StepID and
// decides the instance's side of the write; the caller adds t's own update.
func (l serverless) resume(env Env, inst *workflow.Instance, t *store.Task, res sw.Result, now time.Time, ch *Change) error {
	rt, err := SWRuntime(inst.State)
	if err != nil {
		return err
	}
	release, err := env.swDocuments(inst, res.Output)
	if err != nil {
		return err
	}
	if res.Attempts == 0 {
		res.Attempts = t.Attempt
	}
	step, err := l.w.Resume(env.swEnv(inst, now), rt, t.StepID, res)
	release()
	if err != nil {
		return fmt.Errorf("%w: task %s: %w", ErrLeaseLost, t.StepID, err)
	}
	return env.swApply(inst, rt, step, t.StepID, now, ch)
}

// resumeBounded is resume for an outcome the machine must take
// whatever it is (a timer, a tick, a failure: nothing smaller can be sent
// instead): when the next version's state would be larger than
// env.MaxStateBytes, a RUNNING instance fails in that version, its error
// naming the limit, instead of being decided again for ever.
func (l serverless) resumeBounded(env Env, inst *workflow.Instance, t *store.Task, res sw.Result, now time.Time, ch *Change) error {
	from := inst.Status
	err := l.resume(env, inst, t, res, now, ch)
	var big *workflow.StateTooLargeError
	if !errors.As(err, &big) || from != workflow.StatusRunning {
		return err
	}
	return l.failOversize(env, inst, big, ch)
}

// failOversize fails the Serverless Workflow instance inst, whose next
// state big says is too large, with StateLimitError (failInstance). The
// runtime keeps its context unless the failed state is still too large
// with it.
func (l serverless) failOversize(env Env, inst *workflow.Instance, big *workflow.StateTooLargeError, ch *Change) error {
	if err := failInstance(l.c, inst, StateLimitError(big.Size, big.Max), ch); err != nil {
		return err
	}
	if env.checkSize(inst.State) == nil {
		return nil
	}
	rt, err := SWRuntime(inst.State)
	if err != nil {
		return err
	}
	rt.Context = json.RawMessage("{}")
	if inst.State.Extra[SWStateKey], err = json.Marshal(rt); err != nil {
		return err
	}
	ch.setInstance(inst)
	return env.checkSize(inst.State)
}

// swDocuments takes from the node's gate (Env.Docs) the weight of what a
// step of the machine decodes for its evaluations and schema checks: the
// instance's input, its runtime (the context, the frames' inputs and
// outputs) and the output of the item it resumes with. The machine keeps
// them as JSON text and decodes them as it goes; what it decoded is
// garbage once it returns, when the caller gives the weight back. An
// error is the end of ctx while waiting.
func (env Env) swDocuments(inst *workflow.Instance, result json.RawMessage) (release func(), err error) {
	weight := workflow.DecodedSize(inst.Input) + workflow.DecodedSize(inst.State.Extra[SWStateKey]) + workflow.DecodedSize(result)
	release, err = env.Docs.Acquire(env.evalCtx(), weight)
	if err != nil {
		return nil, fmt.Errorf("waiting for the memory to decode the instance's documents (about %d bytes): %w", weight, err)
	}
	return release, nil
}

// swApply writes the machine's step into inst and ch: the runtime into the
// state, a task row for each new item, state.steps mirroring the pending
// items, the rows of items no longer pending (other than the one that
// finished, done) withdrawn, and the instance COMPLETED or FAILED when the
// workflow ended.
func (env Env) swApply(inst *workflow.Instance, rt *sw.Runtime, step sw.Step, done string, now time.Time, ch *Change) error {
	raw, err := json.Marshal(rt)
	if err != nil {
		return err
	}
	if inst.State.Extra == nil {
		inst.State.Extra = map[string]json.RawMessage{}
	}
	inst.State.Extra[SWStateKey] = raw
	if inst.State.Steps == nil {
		inst.State.Steps = map[string]*workflow.StepState{}
	}
	pending := map[string]sw.Item{}
	for _, it := range rt.Pending() {
		pending[it.ID] = it
	}
	for _, id := range slices.Sorted(maps.Keys(inst.State.Steps)) {
		if _, ok := pending[id]; ok {
			continue
		}
		delete(inst.State.Steps, id)
		if id != done {
			ch.Withdrawn = append(ch.Withdrawn, id)
		}
	}
	for _, it := range step.Start {
		task, st, err := swTask(inst, it, now)
		if err != nil {
			return err
		}
		task.ID = env.NewID()
		inst.State.Steps[it.ID] = st
		ch.Insert = append(ch.Insert, task)
	}
	ch.Cause = step.Cause
	switch {
	case step.Fault != nil:
		inst.Status = workflow.StatusFailed
	case step.Completed:
		inst.Status = workflow.StatusCompleted
		out := step.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		ch.Output = out
	}
	if inst.Status.Terminal() || inst.Status == workflow.StatusFailed {
		// Whatever still waited runs no more.
		for id := range inst.State.Steps {
			ch.Withdrawn = append(ch.Withdrawn, id)
		}
		clear(inst.State.Steps)
		ch.Insert = nil
	}
	return env.checkSize(inst.State)
}

// swTask is the task row of item it, and the state.steps entry that
// mirrors it.
func swTask(inst *workflow.Instance, it sw.Item, now time.Time) (store.Task, *workflow.StepState, error) {
	t := store.Task{InstanceID: inst.ID, StepID: it.ID, Status: store.TaskQueued, MaxAttempts: swAttempts, RunAt: now,
		Input: it.Input, Flow: workflow.TaskFlow{Priority: inst.Priority}, AttemptTimeout: it.Timeout}
	st := &workflow.StepState{Status: workflow.StepRunning}
	switch it.Kind {
	case sw.ItemTick, sw.ItemTimer:
		t.Queue, t.MaxAttempts = store.QueueTick, 1
		if it.RunAt.After(now) {
			t.RunAt = it.RunAt
		}
	case sw.ItemCall:
		if strings.HasPrefix(it.Handler, "flowd:") || it.Handler == "" {
			return store.Task{}, nil, fmt.Errorf("task %s: %q is not a handler name", it.Pointer, it.Handler)
		}
		t.Queue = it.Handler
		// A call a try's retry issued again counts its attempts on, with
		// the budget of a lost worker's redeliveries on top, and keeps the
		// idempotency key of its first issue (SWKeyOf).
		t.Attempt, t.MaxAttempts = it.Attempt, it.Attempt+swAttempts
		if it.KeyOf != "" {
			of, _ := json.Marshal(it.KeyOf)
			st.Extra = map[string]json.RawMessage{SWKeyOf: of}
		}
	case sw.ItemHTTP:
		t.Queue = store.QueueSWCall
	case sw.ItemEmit:
		t.Queue = store.QueueSWEmit
	case sw.ItemListen:
		waiting, _ := json.Marshal(WaitingFor{Name: it.Event, Key: it.Key})
		t.Queue, t.MaxAttempts, t.Input = workflow.EventQueue(it.Event, it.Key), 1, waiting
		st.Status = workflow.StepWaiting
		st.Extra = map[string]json.RawMessage{"event": waiting}
	case sw.ItemChild:
		t.Queue = store.QueueChild
	default:
		return store.Task{}, nil, fmt.Errorf("task %s: unknown item kind %q", it.Pointer, it.Kind)
	}
	if len(t.Input) == 0 {
		t.Input = json.RawMessage("null")
	}
	return t, st, nil
}

// swResult is the outcome an item's completed task carries: the output of
// a handler, a child workflow or a timer as it is; an http or emit item's
// run gives an SWCallResult.
func swResult(t *store.Task, output json.RawMessage) sw.Result {
	switch t.Queue {
	case store.QueueSWCall, store.QueueSWEmit:
		var r SWCallResult
		if err := json.Unmarshal(output, &r); err != nil {
			return sw.Result{Error: swRuntimeError(fmt.Sprintf("the call's result is not readable: %v", err))}
		}
		return sw.Result{Output: r.Output, Error: r.Error}
	case store.QueueTick:
		return sw.Result{}
	}
	return sw.Result{Output: output}
}

// The standard error types of the errors flowd raises for an item.
const (
	swErrorRuntime = sw.ErrorTypePrefix + sw.KindRuntime
	swErrorTimeout = sw.ErrorTypePrefix + sw.KindTimeout
)

func swRuntimeError(detail string) *sw.Error {
	return &sw.Error{Type: swErrorRuntime, Status: 500, Title: "Runtime Error", Detail: detail}
}

// taskFailed records a failed attempt of an item's task: a handler's
// failure, a child workflow that did not complete, or (expired) a lease
// that ran out. A lease lost with attempts left is delivered again; every
// other failure raises a DSL error at the item's task, for the workflow's
// try/catch to handle: flowd retries no handler's failure, whether
// retryable or not.
func (l serverless) taskFailed(env Env, inst *workflow.Instance, t *store.Task, msg string, _, expired bool, now time.Time, ch *Change) error {
	u := *t
	u.LastError = msg
	clearLease(&u)
	timedOut := expired && !t.AttemptDeadline.IsZero() && !now.Before(t.AttemptDeadline)
	if expired && !timedOut && t.Attempt < t.MaxAttempts && !IsTimer(t.Queue) {
		u.Status, u.RunAt = store.TaskQueued, now
		ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
		ch.setInstance(inst)
		ch.Notify = true
		return nil
	}
	if IsTimer(t.Queue) {
		// A timer whose worker was lost just fires.
		u.Status = store.TaskDone
		ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
		if err := l.resumeBounded(env, inst, t, sw.Result{}, now, ch); err != nil {
			return err
		}
		ch.setInstance(inst)
		ch.Notify = ch.claimable()
		return nil
	}
	u.Status = store.TaskFailed
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
	e := swRuntimeError(msg)
	if timedOut {
		e = &sw.Error{Type: swErrorTimeout, Status: 408, Title: "Timeout", Detail: msg}
	}
	if err := l.resumeBounded(env, inst, t, sw.Result{Error: e}, now, ch); err != nil {
		return err
	}
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	return nil
}

// swEventOutput is what a listen item receives: the event as a CloudEvent.
func swEventOutput(ev Event) json.RawMessage {
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	out, _ := json.Marshal(map[string]any{
		"specversion": "1.0", "id": ev.ID, "source": "flowd", "type": ev.Name,
		"subject": ev.Key, "time": ev.CreatedAt.UTC().Format(time.RFC3339Nano), "data": data,
	})
	return out
}
