package rules

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// CompletedCause is the history cause of t's completion.
func CompletedCause(t *store.Task) string {
	return fmt.Sprintf("%s completed (attempt %d)", taskName(t), t.Attempt)
}

// FailedCause is the history cause of a failed attempt of t.
func FailedCause(t *store.Task) string {
	return fmt.Sprintf("%s attempt %d failed", taskName(t), t.Attempt)
}

// taskName names what t runs in a history cause: a step, an iteration of
// a foreach step by its index (the history says which item a write was
// about: its completion leaves no other trace in the step's state), or a
// run of a code workflow.
func taskName(t *store.Task) string {
	if n, ok := workflow.ParseRunStep(t.StepID); ok {
		return fmt.Sprintf("run %d", n)
	}
	if t.Iteration > 0 {
		return fmt.Sprintf("step %q iteration %d", t.StepID, t.Iteration-1)
	}
	return fmt.Sprintf("step %q", t.StepID)
}

// CompleteTask records the output of the attempt holding lease on t: step
// COMPLETED, task DONE, ready steps scheduled, instance settled — and, with
// next, the first due task of the worker's queues leased to it in the same
// write (Change.Next).
//
// Fencing: only t's current, unexpired lease completes (ErrLeaseLost), and
// only while the instance runs its step (ErrNotRunning, ErrLeaseLost). t is
// the row the caller holds locked, or the row as its delivery left it (the
// one-statement completion): then the write's guard, the row as read, misses
// when the stored row moved since (a heartbeat, an expiry, a new delivery). An output that makes the state larger than
// env.MaxStateBytes is refused (workflow.ErrStateTooLarge): the lease stays
// valid, so the worker may complete with less or fail.
//
// Change.Update[0] is t, DONE, guarded by t as read; further updates (none
// today) would re-queue existing tasks.
func (env Env) CompleteTask(c *Definition, inst *workflow.Instance, t *store.Task, lease string, output json.RawMessage, next NextLease, now time.Time) (Change, error) {
	if err := CheckLease(t, lease, now); err != nil {
		return Change{}, err
	}
	if err := checkHolder(inst, t); err != nil {
		return Change{}, err
	}
	from := inst.Status
	ch := Change{Cause: CompletedCause(t)}
	done := *t
	done.Status = store.TaskDone
	done.LastError = ""
	clearLease(&done)
	ch.Update = append(ch.Update, TaskUpdate{Task: done, Guard: store.GuardOf(t)})
	if err := c.Language.taskCompleted(env, inst, t, output, now, &ch); err != nil {
		return Change{}, err
	}
	env.leaseNext(c, inst, next, now, &ch)
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// FailTask records a failed attempt of the lease holder of t: retried after
// the step's backoff while attempts are left and the failure is retryable,
// else the step fails and with it a RUNNING instance (its other active steps
// CANCELLED). Fencing as for CompleteTask. Change.Update[0] is t, QUEUED
// again or FAILED.
func (env Env) FailTask(c *Definition, inst *workflow.Instance, t *store.Task, lease, msg string, retryable bool, now time.Time) (Change, error) {
	if err := CheckLease(t, lease, now); err != nil {
		return Change{}, err
	}
	if err := checkHolder(inst, t); err != nil {
		return Change{}, err
	}
	if strings.TrimSpace(msg) == "" {
		msg = "failed without an error message"
	}
	from := inst.Status
	ch := Change{Cause: FailedCause(t)}
	if err := c.Language.taskFailed(env, inst, t, msg, retryable, false, now, &ch); err != nil {
		return Change{}, err
	}
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// failAttempt records a failed attempt of t's step. With attempts left (and
// a retryable failure) the task is re-queued after the step's backoff — or
// at once when requeueNow — and the step stays RUNNING; otherwise the step
// and the task fail, which fails a RUNNING instance.
func (env Env) failAttempt(c *Definition, inst *workflow.Instance, t *store.Task, msg string, retryable, requeueNow bool, now time.Time) {
	st := inst.State.Steps[t.StepID]
	st.Attempts = max(st.Attempts, t.Attempt)
	st.Error = msg
	t.LastError = msg
	clearLease(t)
	if retryable && t.Attempt < t.MaxAttempts {
		t.Status = store.TaskQueued
		t.RunAt = now
		if t.Queue == store.QueueChild {
			// The attempt's child is done with: until the next attempt
			// starts its own, no child's outcome is this step's.
			st.ClearChildOf(t.Iteration)
		}
		if !requeueNow {
			step, _ := c.Def.Step(t.StepID)
			policy := step.RetryPolicyOrDefault()
			// Backoff counts from the start of the current budget, so a
			// retried workflow starts again from the initial backoff.
			n := t.Attempt - (t.MaxAttempts - policy.MaxAttempts)
			t.RunAt = now.Add(policy.Backoff(max(n, 1), env.Jitter))
		}
		return
	}
	st.Status = workflow.StepFailed
	t.Status = store.TaskFailed
	settle(c, inst, nil, env.MaxStateBytes)
}

// ExpiryReason says why t's lease ended at now: its attempt's deadline
// (the step timeout) or its lease, unrenewed.
func ExpiryReason(t *store.Task, now time.Time) string {
	if !t.AttemptDeadline.IsZero() && !now.Before(t.AttemptDeadline) {
		return "attempt " + strconv.Itoa(t.Attempt) + " timed out"
	}
	return "lease expired (attempt " + strconv.Itoa(t.Attempt) + ")"
}

// ExpiredCause is the history cause of an expired lease of t.
func ExpiredCause(t *store.Task, reason string) string {
	return fmt.Sprintf("%s: %s", taskName(t), reason)
}

// ExpireTimer re-queues a timer whose worker lost its lease: it just runs
// again, at once, without using up an attempt.
func ExpireTimer(t *store.Task, now time.Time) {
	t.Status, t.RunAt = store.TaskQueued, now
	t.MaxAttempts++
	clearLease(t)
}

// ExpireLease decides an expired lease (or timed-out attempt) of a task
// step: it uses up the attempt, as a failure does, and the task is
// re-queued at once while attempts are left, else the step fails (and a
// RUNNING instance with it). ok is false when the instance no longer runs
// the step (stopped, or the step moved on): the instance is not written and
// the task is cancelled (CancelTask). An iteration's expiry needs the rows
// of the others (Env.Tasks): it returns ErrNeedTasks without them.
func (env Env) ExpireLease(c *Definition, inst *workflow.Instance, t *store.Task, now time.Time) (ch Change, ok bool, err error) {
	if checkHolder(inst, t) != nil {
		return Change{}, false, nil
	}
	from := inst.Status
	reason := ExpiryReason(t, now)
	ch.Cause = ExpiredCause(t, reason)
	if err := c.Language.taskFailed(env, inst, t, reason, true, true, now, &ch); err != nil {
		return Change{}, false, err
	}
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, false, err
	}
	return ch, true, nil
}

// CancelTask ends a task whose step no longer runs (its instance stopped,
// or its step was completed another way): CANCELLED, its lease revoked, so
// that the holder's completion is refused.
func CancelTask(t *store.Task) {
	t.Status = store.TaskCancelled
	clearLease(t)
}

// CancelTasks cancels the active tasks among tasks (of an instance that
// stopped running) and returns them as updates.
func CancelTasks(tasks []store.Task) []TaskUpdate {
	var us []TaskUpdate
	for _, t := range tasks {
		if t.Status.Active() {
			CancelTask(&t)
			us = append(us, TaskUpdate{Task: t})
		}
	}
	return us
}
