package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// CheckLease is the fence: only the current, unexpired lease of a leased
// task may act on it (complete, fail, heartbeat, give back). A stale,
// revoked or expired lease returns an error wrapping ErrLeaseLost.
func CheckLease(t *store.Task, lease string, now time.Time) error {
	if t.Status != store.TaskLeased || t.Lease != lease || lease == "" {
		return fmt.Errorf("%w: task %s is %s and this lease is not its current one", ErrLeaseLost, t.ID, t.Status)
	}
	if !leaseRunning(t, now) {
		return fmt.Errorf("%w: the lease of task %s expired at %s", ErrLeaseLost, t.ID, t.LeaseUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// LeaseEnded reports whether t is leased under a lease that has ended at
// now: its expiry may end the attempt. The write that does is guarded by t
// as read, so a heartbeat or a completion since makes it miss.
func LeaseEnded(t *store.Task, now time.Time) bool {
	return t.Status == store.TaskLeased && !leaseRunning(t, now)
}

// leaseRunning is the clock's side of the fence: t's lease runs at now
// until, and not including, its end.
func leaseRunning(t *store.Task, now time.Time) bool { return now.Before(t.LeaseUntil) }

// checkHolder is the instance's side of the fence: a lease holder acts only
// while its instance runs (RUNNING or PAUSED: a paused instance records the
// attempts in flight) and its step is still RUNNING — for a code
// workflow's run, while it is the current run (holdsRun).
func checkHolder(inst *workflow.Instance, t *store.Task) error {
	if inst.Status != workflow.StatusRunning && inst.Status != workflow.StatusPaused {
		return fmt.Errorf("%w: workflow %s is %s", ErrNotRunning, inst.ID, inst.Status)
	}
	if n, ok := workflow.ParseRunStep(t.StepID); ok {
		return holdsRun(inst, t, n)
	}
	// A code workflow's sleep waits (WAITING) on its timer.
	if st := inst.State.Steps[t.StepID]; st == nil || st.Status != workflow.StepRunning && !(st.Status == workflow.StepWaiting && IsTimer(t.Queue)) {
		return fmt.Errorf("%w: step %s is no longer running", ErrLeaseLost, t.StepID)
	}
	return nil
}

// lease delivers the next attempt of t to owner under a fresh fencing
// token (store.Task.Deliver).
func (env Env) lease(t *store.Task, owner string, now time.Time, lease time.Duration) {
	t.Deliver(owner, env.NewID(), now, lease)
}

// IsTimer reports whether tasks of queue are timers (sleep steps, and the
// ticks and timers of Serverless Workflow instances): a timer that lost
// its worker just runs again.
func IsTimer(queue string) bool { return queue == store.QueueSleep || queue == store.QueueTick }

// NextLease asks a completion to lease, in its own write, the next task it
// schedules to the worker that completed: one transaction per step instead
// of two on a chain.
type NextLease struct {
	Queues []string // the queues the worker serves; none: lease nothing
	Owner  string
	Lease  time.Duration
}

// leaseNext leases the first task ch inserts that is due now and belongs to
// one of the worker's queues; the step's state counts the delivered
// attempt. Timers are left to the claim loop.
func (env Env) leaseNext(c *Definition, inst *workflow.Instance, next NextLease, now time.Time, ch *Change) {
	if len(next.Queues) == 0 {
		return
	}
	for i := range ch.Insert {
		nt := &ch.Insert[i]
		// A task under flow control is left to a claim, which checks its keys.
		if IsTimer(nt.Queue) || Held(inst.Status, nt.Queue) || nt.RunAt.After(now) || !slices.Contains(next.Queues, nt.Queue) || nt.Flow.Limited() {
			continue
		}
		st := inst.State.Steps[nt.StepID]
		if st == nil || st.Status != workflow.StepRunning {
			continue
		}
		env.lease(nt, next.Owner, now, next.Lease)
		if nt.Iteration == 0 {
			st.Attempts = nt.Attempt
		}
		ch.Next = nt
		return
	}
}

// ExtendLease is a heartbeat of t's lease holder, whose lease CheckLease
// accepted: while the instance runs (RUNNING or PAUSED), the lease is
// extended to now+d, never past the attempt's deadline. It returns the new
// end.
func ExtendLease(t *store.Task, inst *workflow.Instance, now time.Time, d time.Duration) (time.Time, error) {
	// The holder's fence, as for a completion: a step withdrawn or
	// completed another way takes no heartbeat either.
	if err := checkHolder(inst, t); err != nil {
		return time.Time{}, err
	}
	t.LeaseUntil = now.Add(d)
	if !t.AttemptDeadline.IsZero() && t.AttemptDeadline.Before(t.LeaseUntil) {
		t.LeaseUntil = t.AttemptDeadline
	}
	return t.LeaseUntil, nil
}

// GiveBack returns a task without using up its attempt (a graceful
// shutdown cut its handler short): queued again at once, with one more
// attempt in its budget, so the next delivery is attempt+1 and no retry is
// lost. Only the current lease may give it back.
func GiveBack(t *store.Task, lease string, now time.Time) error {
	if err := CheckLease(t, lease, now); err != nil {
		return err
	}
	t.Status = store.TaskQueued
	t.RunAt = now
	t.MaxAttempts++
	clearLease(t)
	return nil
}
