package rules

import (
	"encoding/json"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// dag is the Language of flowd definitions: a graph of steps, each with
// its state in state.steps, its task rows and its retry policy; an
// instance settles when its steps say so (settle).
type dag struct{ c *Definition }

// CanRetry: a retry re-queues the failed and interrupted steps on their
// rows (prepareRetry).
func (dag) CanRetry() bool { return true }

// ChildDefinition is the definition a workflow step names.
func (d dag) ChildDefinition(_ *workflow.Instance, step string) string {
	if s, ok := d.c.Def.Step(step); ok {
		return s.Definition
	}
	return ""
}

// completesStepsFromOutside: a WAITING step, or a task step as a manual
// override (CompleteStep).
func (dag) completesStepsFromOutside() bool { return true }

// start schedules the steps without dependencies (their `when`
// evaluated); a start that skips every step completes in a second
// version.
func (d dag) start(env Env, inst *workflow.Instance, now time.Time) (Change, error) {
	c := d.c
	inst.Status = workflow.StatusRunning
	inst.Deadline = deadline(c, now)
	ch := Change{Cause: "start"}
	env.advance(c, inst, nil, now, &ch)
	if err := env.checkSize(inst.State); err != nil {
		return Change{}, err
	}
	switch inst.Status {
	case workflow.StatusCompleted:
		// Every step was skipped: an instance is created RUNNING, and
		// completes in a second version (Settled).
		inst.Status = workflow.StatusRunning
		ch.Settled, ch.SettledCause = workflow.StatusCompleted, "every step was skipped at start"
	case workflow.StatusFailed:
		// Nothing runs for a failed instance: the steps scheduled before
		// the one that failed are CANCELLED, and get their tasks on retry.
		ch.Insert = nil
	}
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	return ch, nil
}

// taskCompleted completes the step (or one iteration of a foreach step)
// with output and schedules what became ready.
func (d dag) taskCompleted(env Env, inst *workflow.Instance, t *store.Task, output json.RawMessage, now time.Time, ch *Change) error {
	if t.Iteration > 0 {
		if err := env.completeIteration(d.c, inst, t, output, now, ch); err != nil {
			return err
		}
	} else {
		env.completeStep(d.c, inst, t.StepID, output, t.Attempt, now, ch)
	}
	return env.checkSize(inst.State)
}

// taskFailed applies the step's retry policy (failAttempt): an expired
// lease is re-queued at once, without backoff, while attempts are left.
func (d dag) taskFailed(env Env, inst *workflow.Instance, t *store.Task, msg string, retryable, expired bool, now time.Time, ch *Change) error {
	u := *t
	env.failAttempt(d.c, inst, &u, msg, retryable, expired, now)
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
	if u.Iteration > 0 && u.Status == store.TaskFailed {
		if err := env.iterationFailed(inst, &u, ch); err != nil {
			return err
		}
	}
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	return nil
}

// eventTaken completes the wait step with the event's data as its output.
func (d dag) eventTaken(env Env, inst *workflow.Instance, t *store.Task, ev Event, now time.Time, ch *Change) error {
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	env.completeStep(d.c, inst, t.StepID, data, 0, now, ch)
	return nil
}

// eventUndelivered fails the wait step, and with it a RUNNING instance.
func (d dag) eventUndelivered(env Env, inst *workflow.Instance, t *store.Task, reason string, _ time.Time, _ *Change) error {
	st := inst.State.Steps[t.StepID]
	st.Status, st.Error = workflow.StepFailed, reason
	settle(d.c, inst, nil, env.MaxStateBytes)
	return nil
}

// reopen schedules what became ready (a retry first resets the failed and
// interrupted steps and the timeout); it writes when it retries, when
// something was ready to schedule or skip, or when the instance settled.
func (d dag) reopen(env Env, inst *workflow.Instance, existing map[string]*store.Task, retry bool, now time.Time, ch *Change) bool {
	ready := d.c.decidable(inst.State.Steps)
	if retry {
		prepareRetry(d.c, inst, now)
	}
	env.advance(d.c, inst, existing, now, ch)
	return retry || ready || inst.Status != workflow.StatusRunning
}

// abort: a flowd instance's record of its run is its steps, which
// failInstance cancels.
func (dag) abort(*workflow.Instance, string) error { return nil }
