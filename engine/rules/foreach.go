package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flowd/flowd/workflow"
)

// A step with foreach runs once per item of the array its expression gives
// when the step becomes ready: each item is an iteration with a task row of
// its own (Task.Iteration), so its own attempts, retries, timeout and lease.
// At most max_concurrency iterations are delivered at once (queued or
// leased): the write that finishes one queues the next. The step completes,
// with the outputs in item order, when every iteration has; it fails as
// soon as one iteration has no attempt left, and the others are cancelled
// in that write.
//
// While it runs, the step's state holds, besides its status:
//
//	iterations  {"total", "completed", "failed", "running"}: progress, for people
//	foreach     the bookkeeping (foreachState), dropped when the step completes

// ErrNeedTasks: the decision needs task rows of the instance's iterations
// that it was not given (Env.Tasks): the caller reads the instance's tasks
// and decides again, on a fresh copy of the instance. Only the rare
// decisions need them — an iteration that fails for good (the others'
// rows are cancelled), an iteration re-run after a retry (its row is
// re-queued) — so that a completion, the hot path, reads no other rows.
var ErrNeedTasks = errors.New("the decision needs the task rows of the step's iterations")

// Keys of a foreach step's state besides the usual ones.
const (
	iterationsKey = "iterations"
	foreachKey    = "foreach"
)

// Iterations is the progress of a foreach step, state.steps.S.iterations:
// Running counts the iterations delivered (queued or leased) at the time,
// Failed the iteration that failed the step.
type Iterations struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Running   int `json:"running"`
}

// foreachState is the bookkeeping of a foreach step that has not completed,
// state.steps.S.foreach. Items is the array the expression gave, kept for
// the iterations that start later (when a slot frees up, or on a retry).
// The iterations below Started have a task row (they ran at least once);
// the others never did. Running and Outputs are keyed by index: objects,
// not arrays, because the history stores a version as a patch of the one
// before, which replaces an array whole but changes one member of an
// object — so each completion's history row holds that iteration's output,
// not all of them.
type foreachState struct {
	Items   []json.RawMessage          `json:"items"`
	Started int                        `json:"started"`
	Running map[string]bool            `json:"running"`
	Outputs map[string]json.RawMessage `json:"outputs"`
	Failed  int                        `json:"failed,omitempty"`
}

// foreachOf reads the bookkeeping of st; nil when it has none.
func foreachOf(st *workflow.StepState) (*foreachState, error) {
	raw, ok := st.Extra[foreachKey]
	if !ok {
		return nil, nil
	}
	fe := &foreachState{}
	if err := json.Unmarshal(raw, fe); err != nil {
		return nil, fmt.Errorf("foreach: the step's bookkeeping is not readable: %w", err)
	}
	if fe.Running == nil {
		fe.Running = map[string]bool{}
	}
	if fe.Outputs == nil {
		fe.Outputs = map[string]json.RawMessage{}
	}
	return fe, nil
}

// save writes fe and the progress it gives into st.
func (fe *foreachState) save(st *workflow.StepState) {
	raw, _ := json.Marshal(fe) // raw messages and plain values always encode
	setExtra(st, foreachKey, raw)
	setIterations(st, Iterations{Total: len(fe.Items), Completed: len(fe.Outputs), Failed: fe.Failed, Running: len(fe.Running)})
}

func setIterations(st *workflow.StepState, it Iterations) {
	raw, _ := json.Marshal(it)
	setExtra(st, iterationsKey, raw)
}

func setExtra(st *workflow.StepState, key string, raw json.RawMessage) {
	if st.Extra == nil {
		st.Extra = map[string]json.RawMessage{}
	}
	st.Extra[key] = raw
}

func indexKey(i int) string { return strconv.Itoa(i) }

// next is the iteration to start next, in item order: one that ran before
// and did not complete (re-run after a retry), else the first that never
// started. ok is false when every iteration has started.
func (fe *foreachState) next() (i int, ok bool) {
	if fe.Started-len(fe.Outputs)-len(fe.Running) > 0 {
		for i := range fe.Started {
			k := indexKey(i)
			if _, done := fe.Outputs[k]; !done && !fe.Running[k] {
				return i, true
			}
		}
	}
	if fe.Started < len(fe.Items) {
		return fe.Started, true
	}
	return 0, false
}

// evalCtx bounds an expression's evaluation besides workflow.ExprTimeout.
func (env Env) evalCtx() context.Context {
	if env.Ctx != nil {
		return env.Ctx
	}
	return context.TODO() // a decision made without a caller's context: the timeout alone bounds it
}

// evalForeach runs step id's foreach expression on the instance: the items,
// or the message the step fails with.
func (env Env) evalForeach(c *Definition, inst *workflow.Instance, id string) ([]json.RawMessage, string) {
	doc, err := workflow.ExprDocument(inst.Input, inst.State, nil, 0)
	if err != nil {
		return nil, "foreach: " + err.Error()
	}
	v, err := c.foreach[id].Eval(env.evalCtx(), doc)
	if err != nil {
		return nil, "foreach: " + err.Error()
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '[' {
		return nil, "foreach: gave " + describeValue(v) + ", want an array"
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, "foreach: the array it gave is not readable: " + err.Error()
	}
	if len(items) > workflow.MaxForeachItems {
		return nil, fmt.Sprintf("foreach: gave %d items (at most %d)", len(items), workflow.MaxForeachItems)
	}
	return items, ""
}

// describeValue names the kind of a JSON value, for an error message.
func describeValue(v []byte) string {
	switch {
	case len(v) == 0 || string(v) == "null":
		return "null"
	case v[0] == '{':
		return "an object"
	case v[0] == '"':
		return "a string"
	case string(v) == "true" || string(v) == "false":
		return "a boolean"
	}
	return "a number"
}

// startForeach starts a ready foreach step: its expression gives the items
// (a step retried keeps the items and the completed iterations of its run
// before, and runs the others again with a fresh budget), and the first
// iterations are queued. An expression that fails or does not give an
// array of at most workflow.MaxForeachItems fails the step; an empty array
// completes it at once with [].
func (env Env) startForeach(c *Definition, inst *workflow.Instance, id string, existing map[string]*Task, now time.Time, ch *Change) {
	st := inst.State.Steps[id]
	fe, err := foreachOf(st)
	if err != nil {
		st.Status, st.Error = workflow.StepFailed, err.Error()
		return
	}
	if fe == nil {
		items, msg := env.evalForeach(c, inst, id)
		if msg != "" {
			st.Status, st.Error = workflow.StepFailed, msg
			return
		}
		if len(items) == 0 {
			st.Status, st.Output, st.Error = workflow.StepCompleted, json.RawMessage("[]"), ""
			setIterations(st, Iterations{})
			return
		}
		fe = &foreachState{Items: items, Running: map[string]bool{}, Outputs: map[string]json.RawMessage{}}
	} else {
		// A retry: what ran and did not complete runs again.
		clear(fe.Running)
		fe.Failed = 0
	}
	st.Status, st.Error = workflow.StepRunning, ""
	rows := existing
	if rows == nil {
		rows = env.Tasks
	}
	if err := env.fillIterations(c, inst, id, fe, rows, now, ch); err != nil {
		// Only a re-run needs rows, and a retry gives them all: a caller
		// that did not is told so by the store refusing a second row.
		st.Status, st.Error = workflow.StepFailed, "foreach: "+err.Error()
		return
	}
	fe.save(st)
}

// fillIterations queues iterations of step id while fewer than its
// max_concurrency run, in item order. rows are the instance's task rows by
// TaskKey: an iteration that ran before is re-queued on its row
// (ErrNeedTasks when rows lack it). An iteration whose templates reference
// something missing fails the step (failForeach).
func (env Env) fillIterations(c *Definition, inst *workflow.Instance, id string, fe *foreachState, rows map[string]*Task, now time.Time, ch *Change) error {
	step, _ := c.Def.Step(id)
	limit := step.MaxConcurrency
	if limit <= 0 {
		limit = len(fe.Items)
	}
	var outputs map[string]json.RawMessage
	for len(fe.Running) < limit {
		i, ok := fe.next()
		if !ok {
			return nil
		}
		var prev *Task
		if i < fe.Started {
			if prev = rows[TaskKey(id, i+1)]; prev == nil {
				return ErrNeedTasks
			}
		}
		if outputs == nil {
			outputs = workflow.StepOutputs(inst.State.Steps)
		}
		input, err := c.renderWith(id, inst, outputs, &workflow.Iteration{Item: fe.Items[i], Index: i})
		if err != nil {
			return env.failForeach(inst, id, fe, i, err.Error(), rows, ch)
		}
		fe.Running[indexKey(i)] = true
		fe.Started = max(fe.Started, i+1)
		env.startIteration(c, inst, id, i, input, prev, now, ch)
	}
	return nil
}

// startIteration queues iteration i of step id with its rendered input: a
// task of the step's handler (http: the engine's http queue). prev is the
// iteration's row when it ran before. This is where a step type whose
// iterations start differently plugs in.
func (env Env) startIteration(c *Definition, inst *workflow.Instance, id string, i int, input json.RawMessage, prev *Task, now time.Time, ch *Change) {
	step, _ := c.Def.Step(id)
	queue := step.Handler
	if step.Type == workflow.StepTypeHTTP {
		queue = QueueHTTP
	}
	env.queueTask(inst, id, i+1, queue, now, step.RetryPolicyOrDefault().MaxAttempts, input, prev, ch)
}

// failForeach fails step id because iteration i failed for good (msg says
// why): the iterations still delivered are cancelled in the same write,
// their rows taken from rows (ErrNeedTasks when one is missing), and the
// instance settles FAILED.
func (env Env) failForeach(inst *workflow.Instance, id string, fe *foreachState, i int, msg string, rows map[string]*Task, ch *Change) error {
	delete(fe.Running, indexKey(i))
	for k := range fe.Running {
		n, _ := strconv.Atoi(k)
		key := TaskKey(id, n+1)
		if inserted := ch.inserted(key); inserted >= 0 {
			// Queued by this very decision: not queued after all.
			ch.Insert = append(ch.Insert[:inserted], ch.Insert[inserted+1:]...)
			continue
		}
		if updated := ch.updated(key); updated >= 0 {
			CancelTask(&ch.Update[updated].Task)
			continue
		}
		row := rows[key]
		if row == nil {
			return ErrNeedTasks
		}
		if row.Status.Active() {
			t := *row
			CancelTask(&t)
			ch.Update = append(ch.Update, TaskUpdate{Task: t})
		}
	}
	clear(fe.Running)
	fe.Failed = 1
	st := inst.State.Steps[id]
	st.Status, st.Error = workflow.StepFailed, fmt.Sprintf("iteration %d: %s", i, msg)
	fe.save(st)
	settle(inst)
	return nil
}

// inserted is the position in ch.Insert of the task with key, -1 if none.
func (ch *Change) inserted(key string) int {
	for j := range ch.Insert {
		if TaskKey(ch.Insert[j].StepID, ch.Insert[j].Iteration) == key {
			return j
		}
	}
	return -1
}

// updated is the position in ch.Update of the task with key, -1 if none.
func (ch *Change) updated(key string) int {
	for j := range ch.Update {
		if t := &ch.Update[j].Task; TaskKey(t.StepID, t.Iteration) == key {
			return j
		}
	}
	return -1
}

// completeIteration records the output of iteration t: the step completes
// once every iteration has, with the outputs in item order; until then the
// next iteration is queued in the same write when a slot is free. An
// iteration that no longer runs is refused (ErrLeaseLost).
func (env Env) completeIteration(c *Definition, inst *workflow.Instance, t *Task, output json.RawMessage, now time.Time, ch *Change) error {
	st := inst.State.Steps[t.StepID]
	fe, err := foreachOf(st)
	if err != nil {
		return err
	}
	k := indexKey(t.Iteration - 1)
	if fe == nil || !fe.Running[k] {
		return fmt.Errorf("%w: iteration %d of step %s is no longer running", ErrLeaseLost, t.Iteration-1, t.StepID)
	}
	delete(fe.Running, k)
	fe.Outputs[k] = output
	st.Attempts = max(st.Attempts, t.Attempt)
	if len(fe.Outputs) == len(fe.Items) {
		delete(st.Extra, foreachKey)
		setIterations(st, Iterations{Total: len(fe.Items), Completed: len(fe.Items)})
		env.completeStep(c, inst, t.StepID, fe.ordered(), t.Attempt, now, ch)
		return nil
	}
	if err := env.fillIterations(c, inst, t.StepID, fe, env.Tasks, now, ch); err != nil {
		return err
	}
	if st.Status == workflow.StepRunning {
		fe.save(st)
	}
	return nil
}

// ordered is the step's output: the iterations' outputs in item order.
func (fe *foreachState) ordered() json.RawMessage {
	n := 2
	for _, o := range fe.Outputs {
		n += len(o) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i := range fe.Items {
		if i > 0 {
			out = append(out, ',')
		}
		o := fe.Outputs[indexKey(i)]
		if len(o) == 0 {
			o = json.RawMessage("null")
		}
		out = append(out, o...)
	}
	return append(out, ']')
}

// iterationFailed records that iteration t has no attempt left (its task
// FAILED, the step marked FAILED by failAttempt): the step fails naming the
// index, and the other delivered iterations are cancelled (failForeach).
func (env Env) iterationFailed(inst *workflow.Instance, t *Task, ch *Change) error {
	st := inst.State.Steps[t.StepID]
	fe, err := foreachOf(st)
	if err != nil || fe == nil {
		return err
	}
	return env.failForeach(inst, t.StepID, fe, t.Iteration-1, st.Error, env.Tasks, ch)
}

// cancelIterations cancels the active iterations of step id among rows (a
// foreach step completed from outside) and drops its bookkeeping.
func cancelIterations(st *workflow.StepState, id string, rows map[string]*Task) []TaskUpdate {
	delete(st.Extra, foreachKey)
	var us []TaskUpdate
	for _, row := range rows {
		if row.StepID == id && row.Iteration > 0 && row.Status.Active() {
			t := *row
			CancelTask(&t)
			us = append(us, TaskUpdate{Task: t})
		}
	}
	return us
}
