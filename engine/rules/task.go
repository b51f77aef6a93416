package rules

import (
	"strconv"
	"time"

	"github.com/flowd/flowd/store"
)

// The rules decide on the store's task rows (store.Task): at most one per
// (instance, step, iteration), re-queued with a new attempt on a retry, so
// that no step (nor iteration of a foreach step) is ever scheduled twice.

// TaskKey is how the rules look up a step's existing task row: by step id
// for a step without foreach, by step and iteration for an iteration.
func TaskKey(step string, iteration int) string {
	if iteration == 0 {
		return step
	}
	return step + "#" + strconv.Itoa(iteration)
}

// clearLease ends t's delivery: no lease, no holder, no deadline.
func clearLease(t *store.Task) {
	t.Lease, t.LeaseOwner, t.LeaseUntil, t.AttemptDeadline = "", "", time.Time{}, time.Time{}
}

// Guard is what a task update requires of the stored row for the write to
// apply: a write whose guard no longer holds changes nothing.
type Guard struct {
	// Lease, when set, is the lease the row must still hold, unexpired at
	// the write: the fence of a lease holder's write.
	Lease string
	// Status, when set, is the status the row must still have (a QUEUED
	// task a claim leases, an active task a cancel releases).
	Status store.TaskStatus
	// LeaseEnded turns the Lease guard around: the row must still hold
	// Lease, ended by the write (the fence of a lease expiry: a holder
	// that renewed the lease in between keeps it).
	LeaseEnded bool
}

// TaskUpdate is a task row to write back, with its guard.
type TaskUpdate struct {
	Task  store.Task
	Guard Guard
}
