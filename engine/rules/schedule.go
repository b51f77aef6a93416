package rules

import (
	"encoding/json"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Start decides a new instance of c: inst carries its id, input and initial
// state (c.Def.InitialState with the caller's variables). It becomes
// RUNNING, gets the workflow timeout as its deadline, and its first tasks
// are queued in the same write — a flowd definition's steps without
// dependencies (their `when` evaluated), a Serverless Workflow's first
// items; an instance that waits for nothing (every step skipped, a
// document that ends at once) settles in a second version,
// Change.Settled. A state larger than env.MaxStateBytes is refused
// (workflow.ErrStateTooLarge).
func (env Env) Start(c *Definition, inst *workflow.Instance, now time.Time) (Change, error) {
	return c.Language.start(env, inst, now)
}

// deadline is when an instance started (or retried) now times out; nil
// without a workflow timeout.
func deadline(c *Definition, now time.Time) *time.Time {
	if c.Def.Timeout <= 0 {
		return nil
	}
	d := now.Add(time.Duration(c.Def.Timeout))
	return &d
}

// advance schedules every ready step of a RUNNING instance and settles its
// status: FAILED when a step failed for good, COMPLETED when every step is
// done. existing holds the instance's task rows by step, for steps that ran
// before (a retry re-queues the same row instead of inserting a second
// one). A PAUSED instance is left alone: nothing new is scheduled while
// paused.
func (env Env) advance(c *Definition, inst *workflow.Instance, existing map[string]*store.Task, now time.Time, ch *Change) {
	if inst.Status != workflow.StatusRunning {
		return
	}
	env.runDecided(c, inst, existing, now, ch)
	settle(c, inst, ch, env.MaxStateBytes)
}

// settle moves a RUNNING instance to FAILED or COMPLETED when its steps say
// so. A FAILED instance runs nothing more: its other RUNNING and WAITING
// steps become CANCELLED in the same write (a retry runs them again). An
// instance is COMPLETED when every step is COMPLETED or SKIPPED; it gets
// its output in the same write (Change.Output), or fails when that does
// not render (or renders more than max bytes).
func settle(c *Definition, inst *workflow.Instance, ch *Change, max int) {
	if inst.Status != workflow.StatusRunning {
		return
	}
	done := true
	for _, st := range inst.State.Steps {
		switch st.Status {
		case workflow.StepFailed:
			inst.Status = workflow.StatusFailed
			inst.State.CancelActiveSteps()
			return
		case workflow.StepCompleted, workflow.StepSkipped:
		default:
			done = false
		}
	}
	if done {
		inst.Status = workflow.StatusCompleted
		c.finish(inst, ch, max)
	}
}

// schedule starts one ready step: a wait step starts WAITING; the others
// render their input and get a queued task. A template that references
// something missing fails the step at once, without retry. doc is the
// decision's document (for a foreach expression).
func (env Env) schedule(c *Definition, inst *workflow.Instance, id string, existing map[string]*store.Task, now time.Time, ch *Change, doc *workflow.ExprDoc) {
	step, _ := c.Def.Step(id)
	st := inst.State.Steps[id]
	if st == nil {
		st = &workflow.StepState{}
		if inst.State.Steps == nil {
			inst.State.Steps = map[string]*workflow.StepState{}
		}
		inst.State.Steps[id] = st
	}
	if step.Type == workflow.StepTypeWait {
		st.Status = workflow.StepWaiting
		if step.Event != "" {
			env.awaitEvent(c, inst, step, st, existing[id], now, ch)
		}
		return
	}
	if step.Foreach != "" {
		env.startForeach(c, inst, id, existing, now, ch, doc)
		return
	}
	input, err := c.render(id, inst, env.MaxStateBytes)
	if err != nil {
		st.Status = workflow.StepFailed
		st.Error = err.Error()
		return
	}
	flow, err := c.taskFlow(id, inst, workflow.StepOutputs(inst.State.Steps), nil)
	if err != nil {
		st.Status = workflow.StepFailed
		st.Error = err.Error()
		return
	}
	st.Status = workflow.StepRunning
	st.Error = ""
	queue, runAt, budget, timeout := step.Handler, now, step.RetryPolicyOrDefault().MaxAttempts, time.Duration(step.Timeout)
	switch step.Type {
	case workflow.StepTypeSleep:
		queue, runAt, budget, timeout = store.QueueSleep, now.Add(time.Duration(step.Duration)), 1, 0
	case workflow.StepTypeHTTP:
		queue = store.QueueHTTP
	case workflow.StepTypeWorkflow:
		queue = store.QueueChild // its input is the child's input
	}
	env.queueTask(inst, id, 0, queue, runAt, budget, timeout, input, flow, existing[id], ch)
}

// queueTask queues the task of step id (iteration: see Task.Iteration)
// with a budget of attempts, each bounded by timeout (0: none): a new row
// under flow, or prev, the row it ran on before, re-queued (its flow and
// timeout as it was created).
func (env Env) queueTask(inst *workflow.Instance, id string, iteration int, queue string, runAt time.Time, budget int, timeout time.Duration, input json.RawMessage, flow workflow.TaskFlow, prev *store.Task, ch *Change) {
	if prev != nil {
		// The same row, re-queued with a fresh budget and no lease:
		// whoever still holds the old lease is fenced off.
		t := *prev
		t.Queue, t.Status, t.RunAt, t.Input = queue, store.TaskQueued, runAt, input
		t.MaxAttempts = t.Attempt + budget
		clearLease(&t)
		t.LastError = ""
		ch.Update = append(ch.Update, TaskUpdate{Task: t})
		return
	}
	ch.Insert = append(ch.Insert, store.Task{
		ID: env.NewID(), InstanceID: inst.ID, StepID: id, Iteration: iteration, Queue: queue, Status: store.TaskQueued,
		MaxAttempts: budget, RunAt: runAt, Input: input, Flow: flow, AttemptTimeout: timeout,
	})
}

// completeStep records a step's output and lets the instance move on.
func (env Env) completeStep(c *Definition, inst *workflow.Instance, id string, output json.RawMessage, attempts int, now time.Time, ch *Change) {
	st := inst.State.Steps[id]
	st.Status = workflow.StepCompleted
	st.Output = output
	st.Error = ""
	st.Attempts = max(st.Attempts, attempts)
	env.advance(c, inst, nil, now, ch)
}
