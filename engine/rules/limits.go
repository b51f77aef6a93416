package rules

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Limits of runaway workflows. A definition is a program: a task that jumps
// to itself or a step retried without end writes versions for ever, a
// recursive child step starts workflows without end. Past a limit the
// instance fails for good, with an error naming the limit: no retry policy
// and no try/catch of the document runs on, since they would only run into
// the limit again.

// VersionLimitError is the error of an instance that reached the most
// versions it may have.
func VersionLimitError(max int) string {
	return fmt.Sprintf("the workflow reached --max-versions (%d): an instance may have no more versions, so it is failed", max)
}

// StateLimitError is the error of a Serverless Workflow instance whose
// next state would be size bytes, more than max.
func StateLimitError(size, max int) string {
	return fmt.Sprintf("the workflow's state would be %d bytes, more than --max-state-bytes (%d), so it is failed", size, max)
}

// ErrVersionLimit: a decision would leave the instance no room for the
// version that records its outcome; the caller fails the attempt instead
// (whose decision then fails the instance, VersionLimitError).
var ErrVersionLimit = errors.New("the workflow reached its version limit")

// roomFor reports whether an instance at version v may write k versions
// more: an instance has at most env.MaxVersions versions (0 … MaxVersions-1).
// A change that ends the instance may write the last one; any other must
// leave one, for the version that fails the instance when the next
// decision finds no room.
func (env Env) roomFor(v int64, k int, ends bool) bool {
	if env.MaxVersions <= 0 {
		return true
	}
	left := int64(env.MaxVersions) - 1 - v
	if ends {
		return left >= int64(k)
	}
	return left > int64(k)
}

// versions is how many versions ch writes.
func (ch *Change) versions() int {
	switch {
	case ch.LeasesOnly:
		return 0
	case ch.Settled != "":
		return 2
	}
	return 1
}

// finalStatus is the status ch leaves the instance in.
func (ch *Change) finalStatus() workflow.Status {
	if ch.Settled != "" {
		return ch.Settled
	}
	return ch.Status
}

// limitVersions applies the version limit to ch, decided on inst (at its
// version as read) while inst was from: when ch would leave a RUNNING
// instance no room (roomFor), the same write fails the instance instead. A
// PAUSED instance cannot fail: the first decision after its resume does.
func (env Env) limitVersions(c *Definition, from workflow.Status, inst *workflow.Instance, ch *Change) error {
	k := ch.versions()
	if from != workflow.StatusRunning || k == 0 || env.roomFor(inst.Version, k, ch.finalStatus().StopsSteps()) {
		return nil
	}
	return failInstance(c, inst, VersionLimitError(env.MaxVersions), ch)
}

// failInstance turns ch, a change of the RUNNING instance inst, into one
// that fails inst for good with msg, whatever it was going to do: no step
// runs on (RUNNING and WAITING steps CANCELLED, their tasks cancelled in
// the same write; a Serverless Workflow's pending items withdrawn and msg
// its error), nothing new is scheduled or leased, and a task the change
// re-queued is cancelled instead. The history cause ends with msg.
func failInstance(c *Definition, inst *workflow.Instance, msg string, ch *Change) error {
	inst.Status = workflow.StatusFailed
	// A step whose task the change updates, or already withdrawn, is not
	// withdrawn again: a task is written once.
	updated := map[string]bool{}
	for _, id := range ch.Withdrawn {
		updated[id] = true
	}
	for i := range ch.Update {
		t := &ch.Update[i].Task
		updated[t.StepID] = true
		if t.Status.Active() {
			CancelTask(t)
			ch.Update[i].GuardOnly = false
		}
	}
	for _, id := range slices.Sorted(maps.Keys(inst.State.Steps)) {
		if inst.State.Steps[id].Status.Active() && !updated[id] {
			ch.Withdrawn = append(ch.Withdrawn, id)
		}
	}
	if err := c.Language.abort(inst, msg); err != nil {
		return err
	}
	inst.State.CancelActiveSteps()
	// It changes more than the decision it replaces said it edits.
	ch.Edited, ch.StateLen = nil, 0
	ch.Insert, ch.Next, ch.Output = nil, nil, nil
	ch.Settled, ch.SettledCause = "", ""
	ch.Note = "; " + msg
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	return nil
}

// DescendantLimitError is the error of an instance that would start one
// more child workflow than its top-level workflow root may have
// descendants (children, theirs, …).
func DescendantLimitError(root string, max int) string {
	return fmt.Sprintf("cannot start another child workflow: top-level workflow %s reached --max-descendants (%d)", root, max)
}

// FailForLimit fails the attempt of t holding lease for good with msg, a
// limit it ran into, and with it its step and its RUNNING instance
// (failInstance): no retry policy and no try/catch runs on, since they
// would run into the limit again. An instance that is not RUNNING (PAUSED)
// cannot fail: the attempt fails as FailTask fails it without retry.
// Fencing as for CompleteTask.
func (env Env) FailForLimit(c *Definition, inst *workflow.Instance, t *store.Task, lease, msg string, now time.Time) (Change, error) {
	if inst.Status != workflow.StatusRunning {
		return env.FailTask(c, inst, t, lease, msg, false, now)
	}
	if err := CheckLease(t, lease, now); err != nil {
		return Change{}, err
	}
	if err := checkHolder(inst, t); err != nil {
		return Change{}, err
	}
	ch := Change{Cause: FailedCause(t)}
	u := *t
	u.Status, u.LastError = store.TaskFailed, msg
	clearLease(&u)
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
	// (A Serverless Workflow's steps, which mirror its pending items, are
	// emptied when failInstance aborts its machine.)
	if st := inst.State.Steps[t.StepID]; st != nil {
		st.Status, st.Error = workflow.StepFailed, msg
		st.Attempts = max(st.Attempts, t.Attempt)
	}
	if err := failInstance(c, inst, msg, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}
