package rules

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// CompleteStepCause is the history cause of a step completed from outside.
func CompleteStepCause(step string) string { return fmt.Sprintf("complete step %q", step) }

// ExternalCompletion is a step completed from outside (the API).
type ExternalCompletion struct {
	Step   string
	Output json.RawMessage
	// ExpectedVersion, when set, must equal the instance's version
	// (*VersionMismatchError otherwise).
	ExpectedVersion *int64
	// Task is the step's task, when it has one.
	Task *store.Task
}

// CompleteStep decides a step completed from outside. An unknown step
// (workflow.ErrUnknownStep) or one already COMPLETED
// (workflow.ErrStepCompleted) is refused first, then a stale
// ExpectedVersion. On a free-form instance (c nil) the step just completes.
// On a definition-based one a WAITING step may be completed, and a RUNNING
// (or FAILED) task step as a manual override — its task is cancelled, so
// its outstanding lease can no longer complete it; a PENDING or SKIPPED step
// is refused (ErrStepNotReady). The instance then moves on as after a task
// completion. A state larger than env.MaxStateBytes is refused.
func (env Env) CompleteStep(c *Definition, inst *workflow.Instance, p ExternalCompletion, now time.Time) (Change, error) {
	if c != nil && !c.Language.completesStepsFromOutside() {
		return Change{}, &NotAllowedError{fmt.Sprintf("workflow %s runs a Serverless Workflow document: its tasks are completed by their workers, events and timers, not through the API", inst.ID)}
	}
	st, ok := inst.State.Steps[p.Step]
	if !ok {
		return Change{}, fmt.Errorf("workflow %q has no step %q: %w", inst.ID, p.Step, workflow.ErrUnknownStep)
	}
	if st.Status == workflow.StepCompleted {
		return Change{}, fmt.Errorf("workflow %q step %q: %w", inst.ID, p.Step, workflow.ErrStepCompleted)
	}
	if p.ExpectedVersion != nil && inst.Version != *p.ExpectedVersion {
		return Change{}, &VersionMismatchError{ID: inst.ID, Expected: *p.ExpectedVersion, Actual: inst.Version}
	}
	ch := Change{Cause: CompleteStepCause(p.Step)}
	if c == nil {
		if err := inst.State.CompleteStep(p.Step, p.Output); err != nil {
			return Change{}, err
		}
		if err := env.checkSize(inst.State); err != nil {
			return Change{}, err
		}
		ch.setInstance(inst)
		return ch, nil
	}
	if st.Status == workflow.StepPending || st.Status == workflow.StepSkipped {
		return Change{}, fmt.Errorf("%w: step %q of workflow %s is %s", ErrStepNotReady, p.Step, inst.ID, st.Status)
	}
	from := inst.Status
	attempts := 0
	if p.Task != nil {
		attempts = p.Task.Attempt
	}
	if c.foreach[p.Step] != nil {
		// Its iterations are cancelled, however many are delivered.
		if env.Tasks == nil {
			return Change{}, ErrNeedTasks
		}
		ch.Update = append(ch.Update, cancelIterations(st, p.Step, env.Tasks)...)
		p.Task = nil
	}
	env.completeStep(c, inst, p.Step, p.Output, attempts, now, &ch)
	if err := env.checkSize(inst.State); err != nil {
		return Change{}, err
	}
	if p.Task != nil && p.Task.Status.Active() {
		revoked := *p.Task
		CancelTask(&revoked)
		ch.Update = append(ch.Update, TaskUpdate{Task: revoked})
	}
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}
