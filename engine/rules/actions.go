package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Actions are the lifecycle actions of the API.
var Actions = []string{"cancel", "pause", "resume", "retry"}

// actionTargets: the statuses each action may start from, and where it goes.
var actionTargets = map[string]struct {
	from []workflow.Status
	to   workflow.Status
}{
	"cancel": {[]workflow.Status{workflow.StatusPending, workflow.StatusQueued, workflow.StatusRunning, workflow.StatusPaused}, workflow.StatusCancelled},
	"pause":  {[]workflow.Status{workflow.StatusRunning}, workflow.StatusPaused},
	"resume": {[]workflow.Status{workflow.StatusPaused}, workflow.StatusRunning},
	"retry":  {[]workflow.Status{workflow.StatusFailed, workflow.StatusTimedOut}, workflow.StatusRunning},
}

// IsAction reports whether action is one of Actions.
func IsAction(action string) bool {
	_, ok := actionTargets[action]
	return ok
}

// ActionFor returns the action a status transition from → to is (to
// CANCELLED, RUNNING → PAUSED, PAUSED → RUNNING, FAILED or TIMED_OUT →
// RUNNING): such a transition does what the action does, so that a
// definition-based instance goes on running. ok is false for the others,
// which change the status alone.
func ActionFor(from, to workflow.Status) (action string, ok bool) {
	for _, action := range Actions {
		if t := actionTargets[action]; t.to == to && slices.Contains(t.from, from) {
			return action, true
		}
	}
	return "", false
}

// Act decides action on inst (c is nil for a free-form instance, whose
// status change is all there is). A status the action does not start from
// is refused with a *NotAllowedError. For a definition-based instance,
// resume schedules what became ready while paused; retry gives the instance
// a new workflow timeout and re-queues its failed and interrupted steps
// with a fresh attempt budget; existing holds the instance's tasks by step
// (resume and retry re-queue those rows rather than insert new ones).
//
// An instance whose steps all finished while it was paused (or, for retry,
// stopped) resumes and settles in the same write: Change.Status is the
// action's target and Change.Settled the status it settles in, a second
// version. Cancel's tasks are released with CancelTasks. After a resume,
// tasks queued before the pause are claimable again: Notify is set.
func (env Env) Act(c *Definition, inst *workflow.Instance, action string, existing map[string]*store.Task, now time.Time) (Change, error) {
	target, ok := actionTargets[action]
	if !ok {
		return Change{}, fmt.Errorf("unknown action %q", action)
	}
	if !slices.Contains(target.from, inst.Status) {
		return Change{}, &NotAllowedError{fmt.Sprintf("cannot %s workflow %s: it is %s (allowed from %v)", action, inst.ID, inst.Status, target.from)}
	}
	if c != nil && !c.Language.CanRetry() && action == "retry" {
		return Change{}, &NotAllowedError{fmt.Sprintf("cannot retry workflow %s: a Serverless Workflow instance that faulted cannot be retried (start a new one; use try/catch with retry in the document to retry its tasks)", inst.ID)}
	}
	ch := env.moveTo(c, inst, target.to, action, existing, now)
	ch.Notify = ch.claimable() || action == "resume"
	return ch, nil
}

// moveTo moves inst to status to as action does: for a definition-based
// instance (c not nil) the language schedules what became ready (retry:
// after putting its failed and interrupted steps back), and an instance
// whose steps all finished settles in a second version (Change.Settled).
func (env Env) moveTo(c *Definition, inst *workflow.Instance, to workflow.Status, action string, existing map[string]*store.Task, now time.Time) Change {
	was := inst.Status
	inst.Status = to
	var ch Change
	if c != nil {
		c.Language.reopen(env, inst, existing, action == "retry", now, &ch)
		if inst.Status != to && !workflow.CanTransition(was, inst.Status) {
			// Nothing was left to run: the action's status now, settled
			// in a second version.
			ch.Settled, ch.SettledCause = inst.Status, fmt.Sprintf("%s after %s", inst.Status, action)
			inst.Status = to
		}
	}
	ch.setInstance(inst)
	return ch
}

// Reopen moves inst, which a batch read PAUSED, FAILED, TIMED_OUT or
// QUEUED, to RUNNING in one change, as the action would (Act): resume
// (retry false) schedules what became ready while paused; retry — and the
// start of a QUEUED instance, whose steps are all PENDING — gives the
// instance a new workflow timeout and schedules its steps again. c is nil
// for a free-form instance, whose status change is all there is. existing
// holds the instance's tasks by step. Tasks queued before a pause are
// claimable again: Notify is set.
func (env Env) Reopen(c *Definition, inst *workflow.Instance, existing map[string]*store.Task, retry bool, now time.Time) Change {
	action := "resume"
	if retry {
		action = "retry"
	}
	ch := env.moveTo(c, inst, workflow.StatusRunning, action, existing, now)
	ch.Notify = true
	return ch
}

// prepareRetry gives a retried instance a new timeout and puts its failed,
// cancelled and interrupted steps back to PENDING, so advance schedules them
// again (on their existing task rows, with a fresh budget and a new lease; a
// wait step WAITING again). PENDING steps stay PENDING until their
// dependencies complete.
func prepareRetry(c *Definition, inst *workflow.Instance, now time.Time) {
	inst.Deadline = deadline(c, now)
	for _, st := range inst.State.Steps {
		if st.Status == workflow.StepFailed || st.Status == workflow.StepCancelled || st.Status.Active() {
			st.Status = workflow.StepPending
		}
	}
}

// TimeOut decides the workflow timeout: a RUNNING or PAUSED instance whose
// deadline has passed becomes TIMED_OUT, its RUNNING and WAITING steps
// CANCELLED (the write cancels its tasks: Change.StopTasks). ok is false when
// the timeout does not apply.
func TimeOut(inst *workflow.Instance, now time.Time) (ch Change, ok bool) {
	if inst.Status != workflow.StatusRunning && inst.Status != workflow.StatusPaused ||
		inst.Deadline == nil || !inst.Deadline.Before(now) {
		return Change{}, false
	}
	inst.Status = workflow.StatusTimedOut
	inst.State.CancelActiveSteps()
	ch.setInstance(inst)
	ch.Cause = "workflow timeout"
	return ch, true
}
