package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// plan collects the task writes that go with one instance change; they are
// written in the same transaction, after the instance.
type plan struct {
	insert []*store.Task
	update []*store.Task
}

// claimable reports whether the plan queues a task that some worker has to
// claim: a task leased in the same write (leaseNext) needs no wake-up.
func (p *plan) claimable() bool {
	for _, t := range p.insert {
		if t.Status == store.TaskQueued {
			return true
		}
	}
	for _, t := range p.update {
		if t.Status == store.TaskQueued {
			return true
		}
	}
	return false
}

// write stores the plan's tasks and, if any became claimable, notifies the
// other nodes (delivered when the transaction commits).
func (p *plan) write(ctx context.Context, tx store.Querier) error {
	if len(p.insert) > 0 {
		if err := tx.InsertTasks(ctx, p.insert); err != nil {
			return fmt.Errorf("scheduling tasks: %w", err)
		}
	}
	for _, t := range p.update {
		if err := tx.UpdateTask(ctx, t); err != nil {
			return fmt.Errorf("re-scheduling task %s: %w", t.ID, err)
		}
	}
	if p.claimable() {
		return tx.Notify(ctx)
	}
	return nil
}

// advance schedules every ready step of a RUNNING instance and settles its
// status: FAILED when a step failed for good, COMPLETED when every step is
// done. existing holds the instance's task rows by step, for steps that ran
// before (a retry re-queues the same row instead of inserting a second one).
// A PAUSED instance is left alone: nothing new is scheduled while paused.
func (e *Engine) advance(c *compiled, inst *workflow.Instance, existing map[string]*store.Task, now time.Time, p *plan) {
	if inst.Status != workflow.StatusRunning {
		return
	}
	for _, id := range c.def.Ready(inst.State.Steps) {
		e.schedule(c, inst, id, existing[id], now, p)
	}
	settle(inst)
}

// settle moves a RUNNING instance to FAILED or COMPLETED when its steps say so.
// A FAILED instance runs nothing more: its other RUNNING and WAITING steps
// become CANCELLED in the same write (a retry runs them again).
func settle(inst *workflow.Instance) {
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
	}
}

// schedule starts one ready step: a wait step starts WAITING; the others render
// their input and get a queued task. A template that references something
// missing fails the step at once, without retry.
func (e *Engine) schedule(c *compiled, inst *workflow.Instance, id string, prev *store.Task, now time.Time, p *plan) {
	step, _ := c.def.Step(id)
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
		return
	}
	input, err := c.render(id, inst)
	if err != nil {
		st.Status = workflow.StepFailed
		st.Error = err.Error()
		return
	}
	st.Status = workflow.StepRunning
	st.Error = ""
	queue, runAt, budget := step.Handler, now, step.RetryPolicyOrDefault().MaxAttempts
	switch step.Type {
	case workflow.StepTypeSleep:
		queue, runAt, budget = store.QueueSleep, now.Add(time.Duration(step.Duration)), 1
	case workflow.StepTypeHTTP:
		queue = store.QueueHTTP
	}
	if prev != nil {
		// The same row, re-queued with a fresh budget and no lease: whoever
		// still holds the old lease is fenced off.
		prev.Queue, prev.Status, prev.RunAt, prev.Input = queue, store.TaskQueued, runAt, input
		prev.MaxAttempts = prev.Attempt + budget
		clearLease(prev)
		prev.LastError = ""
		p.update = append(p.update, prev)
		return
	}
	p.insert = append(p.insert, &store.Task{
		ID: store.NewID(), InstanceID: inst.ID, StepID: id, Queue: queue, Status: store.TaskQueued,
		MaxAttempts: budget, RunAt: runAt, Input: input,
	})
}

func clearLease(t *store.Task) {
	t.Lease, t.LeaseOwner, t.LeaseUntil, t.AttemptDeadline = "", "", time.Time{}, time.Time{}
}

// render produces a step's task input from the workflow input and the outputs
// of completed steps. An http step's input is its rendered request.
func (c *compiled) render(id string, inst *workflow.Instance) (json.RawMessage, error) {
	outputs := workflow.StepOutputs(inst.State.Steps)
	step, _ := c.def.Step(id)
	if step.Type == workflow.StepTypeHTTP {
		req := httpInput{Method: step.Request.Method, Headers: map[string]string{}}
		var err error
		if req.URL, err = c.urls[id].RenderString(inst.Input, outputs); err != nil {
			return nil, err
		}
		for k, t := range c.headers[id] {
			if req.Headers[k], err = t.RenderString(inst.Input, outputs); err != nil {
				return nil, err
			}
		}
		if t := c.bodies[id]; t != nil {
			if req.Body, err = t.Render(inst.Input, outputs); err != nil {
				return nil, err
			}
		}
		return json.Marshal(req)
	}
	if t := c.inputs[id]; t != nil {
		return t.Render(inst.Input, outputs)
	}
	return json.RawMessage("null"), nil
}

// httpInput is the rendered request an http step's task carries.
type httpInput struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// completeStep records a step's output and lets the instance move on.
func (e *Engine) completeStep(c *compiled, inst *workflow.Instance, id string, output json.RawMessage, attempts int, now time.Time, p *plan) {
	st := inst.State.Steps[id]
	st.Status = workflow.StepCompleted
	st.Output = output
	st.Error = ""
	st.Attempts = max(st.Attempts, attempts)
	e.advance(c, inst, nil, now, p)
}

// failAttempt records a failed attempt of t's step. With attempts left (and a
// retryable failure) the task is re-queued after the step's backoff — or at
// once when requeueNow — and the step stays RUNNING; otherwise the step and
// the task fail, which fails a RUNNING instance.
func (e *Engine) failAttempt(c *compiled, inst *workflow.Instance, t *store.Task, msg string, retryable, requeueNow bool, now time.Time) {
	st := inst.State.Steps[t.StepID]
	st.Attempts = max(st.Attempts, t.Attempt)
	st.Error = msg
	t.LastError = msg
	clearLease(t)
	if retryable && t.Attempt < t.MaxAttempts {
		t.Status = store.TaskQueued
		t.RunAt = now
		if !requeueNow {
			step, _ := c.def.Step(t.StepID)
			policy := step.RetryPolicyOrDefault()
			// Backoff counts from the start of the current budget, so a retried
			// workflow starts again from the initial backoff.
			n := t.Attempt - (t.MaxAttempts - policy.MaxAttempts)
			t.RunAt = now.Add(policy.Backoff(max(n, 1), e.jitter))
		}
		return
	}
	st.Status = workflow.StepFailed
	t.Status = store.TaskFailed
	settle(inst)
}

// errDefMissing asks the caller to load a definition outside the transaction
// and run it again: loading inside could wait for a connection the
// transaction itself holds (SQLite's single writer).
type errDefMissing struct{ key defKey }

func (e errDefMissing) Error() string {
	return fmt.Sprintf("definition %s revision %d not loaded", e.key.name, e.key.rev)
}

// cached returns a compiled revision that is already loaded, or errDefMissing.
func (e *Engine) cached(inst *workflow.Instance) (*compiled, error) {
	key := defKey{inst.Definition, inst.DefinitionRevision}
	e.cacheMu.Lock()
	c, ok := e.cache[key]
	e.cacheMu.Unlock()
	if !ok {
		return nil, errDefMissing{key}
	}
	return c, nil
}

// withDefs runs fn, and again after loading each definition fn found
// missing: as long as every run finds a new one missing (a batch may meet
// several), so it ends.
func (e *Engine) withDefs(ctx context.Context, fn func() error) error {
	loaded := map[defKey]bool{}
	for {
		err := fn()
		var miss errDefMissing
		if !errors.As(err, &miss) {
			return err
		}
		if loaded[miss.key] {
			return fmt.Errorf("definition cache kept missing %s revision %d", miss.key.name, miss.key.rev)
		}
		loaded[miss.key] = true
		if _, err := e.compiled(ctx, miss.key.name, miss.key.rev); err != nil {
			return err
		}
	}
}
