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

// TaskUpdate is a task row to write back, with its guard: the row as the
// rules read it (store.GuardOf), taken before they changed it. A zero
// Guard leaves it to the caller, which guards the update with the row it
// read and gave the rules (Env.Tasks, a stopped instance's rows).
type TaskUpdate struct {
	Task  store.Task
	Guard store.TaskGuard
	// GuardOnly: Task is the row as read, unchanged, written only as the
	// guard of the version (store.TaskWrite.GuardOnly).
	GuardOnly bool
}
