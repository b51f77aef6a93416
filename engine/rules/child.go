package rules

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Workflow steps are served by the engine on store.QueueChild: claiming one
// of its tasks starts the step's child workflow, in one write with the
// parent's state naming the child (the step is RUNNING from the moment it
// was scheduled, as a task step's is). A retry re-queues the task after
// its backoff, and the next claim starts a new child.

// MaxChildDepth bounds nesting: a child workflow is at most this many
// levels below the workflow that no workflow step started. A definition
// that starts itself would otherwise start children without end.
const MaxChildDepth = 10

// childLease is how long a started child's task stays leased when its
// step has no timeout: the child's outcome, not a worker's heartbeat, ends
// the attempt, so the lease must not run out first.
const childLease = 100 * 365 * 24 * time.Hour

// ChildStartedCause is the history cause of the parent's write that starts
// a child for t.
func ChildStartedCause(t *store.Task, child string) string {
	return fmt.Sprintf("%s started child workflow %s (attempt %d)", taskName(t), child, t.Attempt)
}

// StartChild records in the parent inst that the attempt of t holding
// lease runs the child workflow child: state.steps.S.child names it, and
// t stays leased until the attempt's deadline (the step timeout) or, with
// no timeout, for as long as the child runs (childLease), so that only the
// child's outcome or the timeout ends the attempt. Fencing as for
// CompleteTask.
//
// A RUNNING instance whose version leaves no room for the child's outcome
// starts none: ErrVersionLimit (the caller fails the attempt, which fails
// the instance at its version limit).
func (env Env) StartChild(inst *workflow.Instance, t *store.Task, lease, child string, now time.Time) (Change, error) {
	if err := CheckLease(t, lease, now); err != nil {
		return Change{}, err
	}
	if err := checkHolder(inst, t); err != nil {
		return Change{}, err
	}
	if inst.Status == workflow.StatusRunning && !env.roomFor(inst.Version, 1, false) {
		return Change{}, fmt.Errorf("%w: %s", ErrVersionLimit, VersionLimitError(env.MaxVersions))
	}
	inst.State.Steps[t.StepID].SetChildOf(t.Iteration, child)
	u := *t
	u.LeaseUntil = now.Add(childLease)
	if !u.AttemptDeadline.IsZero() {
		u.LeaseUntil = u.AttemptDeadline
	}
	ch := Change{Cause: ChildStartedCause(t, child)}
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
	ch.setInstance(inst)
	return ch, nil
}

// WaitsFor reports whether the parent inst's attempt t still waits for the
// child workflow child: t is leased, its step RUNNING and naming child.
// Only then may the child's outcome end the attempt; a child of an earlier
// attempt, or of a step that moved on, reports to nobody.
func WaitsFor(inst *workflow.Instance, t *store.Task, child string) bool {
	if t.Status != store.TaskLeased || t.Queue != store.QueueChild || checkHolder(inst, t) != nil {
		return false
	}
	return inst.State.Steps[t.StepID].ChildOf(t.Iteration) == child
}

// ChildFinished decides the outcome of the child workflow child of the
// parent inst's attempt t: a COMPLETED child completes the step with
// output; a FAILED, TIMED_OUT or CANCELLED one fails the attempt, and the
// step's retry policy starts a new child after its backoff. ok is false
// when the attempt no longer waits for that child (WaitsFor) or the child
// has not finished: then nothing is written. The task's update is guarded
// by the row as read, so two deliveries of one outcome write it once.
func (env Env) ChildFinished(c *Definition, inst *workflow.Instance, t *store.Task, child string, status workflow.Status, output json.RawMessage, now time.Time) (ch Change, ok bool, err error) {
	if !WaitsFor(inst, t, child) {
		return Change{}, false, nil
	}
	switch status {
	case workflow.StatusCompleted:
		ch, err = env.CompleteTask(c, inst, t, t.Lease, output, NextLease{}, now)
	case workflow.StatusFailed, workflow.StatusTimedOut, workflow.StatusCancelled:
		ch, err = env.FailTask(c, inst, t, t.Lease, fmt.Sprintf("child workflow %s is %s", child, status), true, now)
	default:
		return Change{}, false, nil
	}
	if err != nil {
		return Change{}, false, err
	}
	return ch, true, nil
}

// ChildOutput is the output a COMPLETED child workflow gives its parent's
// step: the child's own output (written, when its final write carries it),
// else the one its definition gives for its input and state (the output
// template, or the outputs of its completed final steps) — for a child
// moved to COMPLETED by a transition or a batch, which write no output. A
// template renders at most max
// bytes.
func ChildOutput(c *Definition, input json.RawMessage, state workflow.State, written json.RawMessage, max int) (json.RawMessage, error) {
	if len(written) > 0 {
		return written, nil
	}
	return c.output(&workflow.Instance{Input: input, State: state}, max)
}

// DepthError is the error of a workflow step whose child would be nested
// deeper than MaxChildDepth.
func DepthError(depth int) string {
	return fmt.Sprintf("child workflows cannot be nested deeper than %d levels: this workflow is %d levels below its top-level workflow", MaxChildDepth, depth)
}

// UnknownDefinitionError is the error of a workflow step whose definition
// is not stored.
func UnknownDefinitionError(name string) string {
	return fmt.Sprintf("child workflow definition %q does not exist", name)
}

// AbandonedCause is the history cause of the child workflows cancelled
// because their parent no longer runs.
const AbandonedCause = "cancel: its parent workflow no longer runs"

// CancelAbandoned decides the cancel of children, child workflows read
// while their parent no longer ran (cancelled, or stopped otherwise):
// nothing waits for their outcome any more. It returns their ids by the
// status each is cancelled from, the status it must still have when it is
// written (a child that moved on meanwhile is decided again on a fresh
// read). As every write to CANCELLED, it makes their RUNNING and WAITING
// steps CANCELLED and their tasks in the same write, and their
// own children are abandoned in turn. An instance that is not a child, or
// that no longer runs (PENDING, QUEUED, RUNNING, PAUSED), is left alone.
func CancelAbandoned(children []*workflow.Instance) map[workflow.Status][]string {
	byStatus := map[workflow.Status][]string{}
	for _, inst := range children {
		if inst.Parent != nil && workflow.CanTransition(inst.Status, workflow.StatusCancelled) {
			byStatus[inst.Status] = append(byStatus[inst.Status], inst.ID)
		}
	}
	return byStatus
}
