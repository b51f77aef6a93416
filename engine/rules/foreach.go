package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flowd/flowd/store"
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
//
// A completed iteration's output is kept on its task row (store.Task.Output),
// the iteration's own record, not in the step's: each completion writes its
// own output and the step's small bookkeeping, whatever the number of
// iterations before it. The step's output is made from the rows once every
// iteration has completed.

// ErrNeedTasks: the decision needs task rows of the instance's iterations
// that it was not given (Env.Tasks): the caller reads the instance's tasks
// and decides again, on a fresh copy of the instance. Only the rare
// decisions need them — the completion of the last iteration (the step's
// output is made from the others' rows), an iteration that fails for good
// (the others' rows are cancelled), an iteration re-run after a retry (its
// row is re-queued) — so that a completion, the hot path, reads no other
// rows.
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
// state.steps.S.foreach. Iterations start in item order: those below
// Started have a task row (they ran at least once), the others never did.
// Items is the array the expression gave, kept only until every iteration
// has started (an iteration that runs again re-uses its row's input).
// Pending are started iterations to run again (after a failure or a stop,
// once retried), by index; Completed counts the completed ones, whose rows
// are DONE and hold their outputs.
type foreachState struct {
	Items     json.RawMessage `json:"items,omitempty"`
	Total     int             `json:"total"`
	Started   int             `json:"started"`
	Completed int             `json:"completed"`
	Failed    int             `json:"failed,omitempty"`
	Pending   map[string]bool `json:"pending,omitempty"`
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
	if fe.Pending == nil {
		fe.Pending = map[string]bool{}
	}
	return fe, nil
}

// running is the number of iterations delivered (queued or leased).
func (fe *foreachState) running() int { return fe.Started - fe.Completed - len(fe.Pending) }

// save writes fe and the progress it gives into st.
func (fe *foreachState) save(st *workflow.StepState) {
	if fe.Started == fe.Total {
		fe.Items = nil
	}
	raw, _ := json.Marshal(fe) // raw messages and plain values always encode
	setExtra(st, foreachKey, raw)
	setIterations(st, Iterations{Total: fe.Total, Completed: fe.Completed, Failed: fe.Failed, Running: fe.running()})
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

// stopRunning makes every started iteration that has not completed pending
// (to run again on a retry) and returns the indexes of those that were
// delivered. Which completed, its rows say (as ch leaves them: an
// iteration this decision completed, started or cancelled is ch's), by
// TaskKey of step id (ErrNeedTasks when one is missing); none is needed
// while no iteration has completed.
func (fe *foreachState) stopRunning(id string, rows map[string]*store.Task, ch *Change) ([]int, error) {
	var delivered []int
	for i := range fe.Started {
		k := indexKey(i)
		if fe.Pending[k] {
			continue
		}
		if fe.Completed > 0 {
			done, err := iterationDone(id, i, rows, ch)
			if err != nil {
				return nil, err
			}
			if done {
				continue
			}
		}
		fe.Pending[k] = true
		delivered = append(delivered, i)
	}
	return delivered, nil
}

// iterationDone reports whether iteration i of step id has completed: its
// row as ch writes it, else as read (rows).
func iterationDone(id string, i int, rows map[string]*store.Task, ch *Change) (bool, error) {
	key := TaskKey(id, i+1)
	if j := ch.updated(key); j >= 0 {
		return ch.Update[j].Task.Status == store.TaskDone, nil
	}
	if ch.inserted(key) >= 0 {
		return false, nil
	}
	row := rows[key]
	if row == nil {
		return false, ErrNeedTasks
	}
	return row.Status == store.TaskDone, nil
}

// next is the iteration to start next, in item order: a pending one (it
// runs again), else the first that never started. ok is false when there
// is none.
func (fe *foreachState) next() (i int, rerun, ok bool) {
	if len(fe.Pending) > 0 {
		i = -1
		for k := range fe.Pending {
			if n, err := strconv.Atoi(k); err == nil && (i < 0 || n < i) {
				i = n
			}
		}
		if i >= 0 {
			return i, true, true
		}
	}
	if fe.Started < fe.Total {
		return fe.Started, false, true
	}
	return 0, false, false
}

// exprBudget is the budget of every expression evaluation: time, and
// values no larger than the state may be.
func (env Env) exprBudget() workflow.ExprBudget {
	return workflow.ExprBudget{MaxStateBytes: env.MaxStateBytes}
}

// evalCtx bounds an expression's evaluation besides workflow.ExprTimeout.
func (env Env) evalCtx() context.Context {
	if env.Ctx != nil {
		return env.Ctx
	}
	return context.TODO() // a decision made without a caller's context: the timeout alone bounds it
}

// evalForeach runs step id's foreach expression on the instance (doc: the
// decision's document): the array of items and their number, or the
// message the step fails with.
func (env Env) evalForeach(c *Definition, inst *workflow.Instance, id string, doc *workflow.ExprDoc) (json.RawMessage, int, string) {
	d, err := doc.Document(inst.Input, inst.State)
	if err != nil {
		return nil, 0, "foreach: " + err.Error()
	}
	v, err := c.foreach[id].Eval(env.evalCtx(), d, env.exprBudget())
	if err != nil {
		return nil, 0, "foreach: " + err.Error()
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '[' {
		return nil, 0, "foreach: gave " + describeValue(v) + ", want an array"
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, 0, "foreach: the array it gave is not readable: " + err.Error()
	}
	if len(items) > workflow.MaxForeachItems {
		return nil, 0, fmt.Sprintf("foreach: gave %d items (at most %d)", len(items), workflow.MaxForeachItems)
	}
	return v, len(items), ""
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
// completes it at once with []. doc is the decision's document.
func (env Env) startForeach(c *Definition, inst *workflow.Instance, id string, existing map[string]*store.Task, now time.Time, ch *Change, doc *workflow.ExprDoc) {
	st := inst.State.Steps[id]
	fe, err := foreachOf(st)
	if err == nil && fe != nil {
		// A retry: what started and did not complete runs again.
		fe.Failed = 0
		rows := existing
		if rows == nil {
			rows = env.Tasks
		}
		_, err = fe.stopRunning(id, rows, ch)
	}
	if err != nil {
		st.Status, st.Error = workflow.StepFailed, err.Error()
		return
	}
	if fe == nil {
		items, n, msg := env.evalForeach(c, inst, id, doc)
		if msg != "" {
			st.Status, st.Error = workflow.StepFailed, msg
			return
		}
		if n == 0 {
			st.Status, st.Output, st.Error = workflow.StepCompleted, json.RawMessage("[]"), ""
			setIterations(st, Iterations{})
			return
		}
		fe = &foreachState{Items: items, Total: n, Pending: map[string]bool{}}
	}
	st.Status, st.Error = workflow.StepRunning, ""
	rows := existing
	if rows == nil {
		rows = env.Tasks
	}
	if err := env.fillIterations(c, inst, id, fe, rows, now, ch); err != nil {
		// Only a re-run needs rows, and a retry gives them all.
		st.Status, st.Error = workflow.StepFailed, "foreach: "+err.Error()
		return
	}
	if st.Status == workflow.StepRunning {
		fe.save(st)
	}
}

// fillIterations queues iterations of step id while fewer than its
// max_concurrency run, in item order. rows are the instance's task rows by
// TaskKey: an iteration that ran before is re-queued on its row, with its
// input (ErrNeedTasks when rows lack it). An iteration whose templates
// reference something missing fails the step (failForeach).
func (env Env) fillIterations(c *Definition, inst *workflow.Instance, id string, fe *foreachState, rows map[string]*store.Task, now time.Time, ch *Change) error {
	step, _ := c.Def.Step(id)
	limit := step.MaxConcurrency
	if limit <= 0 {
		limit = fe.Total
	}
	var items []json.RawMessage
	var outputs map[string]json.RawMessage
	for fe.running() < limit {
		i, rerun, ok := fe.next()
		if !ok {
			return nil
		}
		if rerun {
			prev := rows[TaskKey(id, i+1)]
			if prev == nil {
				return ErrNeedTasks
			}
			delete(fe.Pending, indexKey(i))
			env.startIteration(c, inst, id, i, prev.Input, prev.Flow, prev, now, ch)
			continue
		}
		if items == nil {
			if err := json.Unmarshal(fe.Items, &items); err != nil || len(items) != fe.Total {
				return fmt.Errorf("the items kept for the iterations to come are not readable (%d of %d): %w", len(items), fe.Total, err)
			}
			outputs = workflow.StepOutputs(inst.State.Steps)
		}
		it := &workflow.Iteration{Item: items[i], Index: i}
		input, err := c.renderWith(id, inst, outputs, it, env.MaxStateBytes)
		if err != nil {
			return env.failForeach(inst, id, fe, i, err.Error(), rows, ch)
		}
		flow, err := c.taskFlow(id, inst, outputs, it)
		if err != nil {
			return env.failForeach(inst, id, fe, i, err.Error(), rows, ch)
		}
		fe.Started = i + 1
		env.startIteration(c, inst, id, i, input, flow, nil, now, ch)
	}
	return nil
}

// startIteration queues iteration i of step id with its rendered input: a
// task of the step's handler (http: the engine's http queue). prev is the
// iteration's row when it ran before. This is where a step type whose
// iterations start differently plugs in (a workflow step: a child workflow
// per item, its completion reported as the iteration's).
func (env Env) startIteration(c *Definition, inst *workflow.Instance, id string, i int, input json.RawMessage, flow workflow.TaskFlow, prev *store.Task, now time.Time, ch *Change) {
	step, _ := c.Def.Step(id)
	queue := step.Handler
	switch step.Type {
	case workflow.StepTypeHTTP:
		queue = store.QueueHTTP
	case workflow.StepTypeWorkflow:
		queue = store.QueueChild // the iteration's input is its child's input
	}
	env.queueTask(inst, id, i+1, queue, now, step.RetryPolicyOrDefault().MaxAttempts, time.Duration(step.Timeout), input, flow, prev, ch)
}

// failForeach fails step id because iteration i failed for good (msg says
// why): the iterations still delivered are cancelled in the same write,
// their rows taken from rows (ErrNeedTasks when one is missing), and the
// instance settles FAILED. Every started iteration that did not complete
// runs again on a retry.
func (env Env) failForeach(inst *workflow.Instance, id string, fe *foreachState, i int, msg string, rows map[string]*store.Task, ch *Change) error {
	delivered, err := fe.stopRunning(id, rows, ch)
	if err != nil {
		return err
	}
	unstarted := -1
	for _, n := range delivered {
		if n == i {
			continue
		}
		key := TaskKey(id, n+1)
		if inserted := ch.inserted(key); inserted >= 0 {
			// Started by this very decision, the last ones started: not
			// started after all (no row to run again on).
			ch.Insert = append(ch.Insert[:inserted], ch.Insert[inserted+1:]...)
			delete(fe.Pending, indexKey(n))
			if unstarted < 0 || n < unstarted {
				unstarted = n
			}
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
	if unstarted >= 0 {
		fe.Started = unstarted
	}
	fe.Failed = 1
	st := inst.State.Steps[id]
	st.Status, st.Error = workflow.StepFailed, fmt.Sprintf("iteration %d: %s", i, msg)
	fe.save(st)
	settle(nil, inst, ch, env.MaxStateBytes) // a step failed: the instance fails, it cannot complete (no output to render)
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
// next iteration is queued in the same write when a slot is free. Only a
// delivered iteration has an active task, so the lease that completes it
// (CheckLease) says that it runs.
func (env Env) completeIteration(c *Definition, inst *workflow.Instance, t *store.Task, output json.RawMessage, now time.Time, ch *Change) error {
	st := inst.State.Steps[t.StepID]
	fe, err := foreachOf(st)
	if err != nil {
		return err
	}
	if fe == nil {
		return fmt.Errorf("%w: step %s runs no iterations", ErrLeaseLost, t.StepID)
	}
	key := TaskKey(t.StepID, t.Iteration)
	j := ch.updated(key)
	if j < 0 {
		return fmt.Errorf("foreach: the completion of %s does not write its row", key)
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	ch.Update[j].Task.Output = output
	fe.Completed++
	st.Attempts = max(st.Attempts, t.Attempt)
	if fe.Completed == fe.Total {
		out, err := env.ordered(t.StepID, fe.Total, ch)
		if err != nil {
			return err
		}
		delete(st.Extra, foreachKey)
		setIterations(st, Iterations{Total: fe.Total, Completed: fe.Total})
		env.completeStep(c, inst, t.StepID, out, t.Attempt, now, ch)
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

// ordered is the output of step id, whose n iterations have all
// completed: their outputs in item order, from their rows as ch writes
// them, else as read (Env.Tasks; ErrNeedTasks without them).
func (env Env) ordered(id string, n int, ch *Change) (json.RawMessage, error) {
	outputs := make([]json.RawMessage, n)
	size := 2
	for i := range n {
		key := TaskKey(id, i+1)
		var row *store.Task
		if j := ch.updated(key); j >= 0 {
			row = &ch.Update[j].Task
		} else if row = env.Tasks[key]; row == nil {
			return nil, ErrNeedTasks
		}
		if row.Status != store.TaskDone {
			return nil, fmt.Errorf("foreach: iteration %d of step %s counts as completed, but its task is %s", i, id, row.Status)
		}
		outputs[i] = row.Output
		if len(outputs[i]) == 0 {
			outputs[i] = json.RawMessage("null")
		}
		size += len(outputs[i]) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, o := range outputs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, o...)
	}
	return append(out, ']'), nil
}

// iterationFailed records that iteration t has no attempt left (its task
// FAILED, the step marked FAILED by failAttempt): the step fails naming the
// index, and the other delivered iterations are cancelled (failForeach).
func (env Env) iterationFailed(inst *workflow.Instance, t *store.Task, ch *Change) error {
	st := inst.State.Steps[t.StepID]
	fe, err := foreachOf(st)
	if err != nil || fe == nil {
		return err
	}
	return env.failForeach(inst, t.StepID, fe, t.Iteration-1, st.Error, env.Tasks, ch)
}

// cancelIterations cancels the active iterations of step id among rows (a
// foreach step completed from outside) and drops its bookkeeping.
func cancelIterations(st *workflow.StepState, id string, rows map[string]*store.Task) []TaskUpdate {
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
