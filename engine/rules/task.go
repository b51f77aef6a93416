package rules

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/flowd/flowd/workflow"
)

// TaskStatus is the status of a task: the store's task statuses, by value.
type TaskStatus string

// Task statuses. A task is QUEUED until claimed, LEASED while a worker holds
// it, and ends DONE, FAILED (no attempt left, or failed for good) or
// CANCELLED (its instance stopped running, or its step was completed
// another way).
const (
	TaskQueued    TaskStatus = "QUEUED"
	TaskLeased    TaskStatus = "LEASED"
	TaskDone      TaskStatus = "DONE"
	TaskFailed    TaskStatus = "FAILED"
	TaskCancelled TaskStatus = "CANCELLED"
)

// Active reports whether the task may still be delivered or completed.
func (s TaskStatus) Active() bool { return s == TaskQueued || s == TaskLeased }

// Queues the engine serves itself; every other queue is a handler name.
const (
	QueueSleep = "flowd:sleep"
	QueueHTTP  = "flowd:http"
)

// Task is what the rules see of a task row: at most one per (instance,
// step, iteration), re-queued with a new attempt on a retry, so that no
// step (nor iteration of a foreach step) is ever scheduled twice.
type Task struct {
	ID         string
	InstanceID string
	StepID     string
	// Iteration is 0 for a step without foreach, the item's index plus one
	// for an iteration of a foreach step.
	Iteration int
	// Queue routes the task: a handler name, QueueSleep or QueueHTTP.
	Queue  string
	Status TaskStatus
	// Attempt is the latest attempt delivered (0 before the first);
	// MaxAttempts is the attempt after which no retry is left.
	Attempt     int
	MaxAttempts int
	// RunAt is when the task becomes claimable (backoff, sleep timers).
	RunAt time.Time
	// Lease is the fencing token of the current delivery ("" when not
	// leased); LeaseUntil is when it ends; AttemptDeadline (zero: none)
	// bounds the attempt whatever the heartbeats.
	Lease           string
	LeaseOwner      string
	LeaseUntil      time.Time
	AttemptDeadline time.Time
	Input           json.RawMessage
	LastError       string
	// Flow is how the task is claimed: its priority and keys, rendered
	// when the task is created.
	Flow workflow.TaskFlow
}

// TaskKey is how the rules look up a step's existing task row: by step id
// for a step without foreach, by step and iteration for an iteration.
func TaskKey(step string, iteration int) string {
	if iteration == 0 {
		return step
	}
	return step + "#" + strconv.Itoa(iteration)
}

func (t *Task) clearLease() {
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
	Status TaskStatus
	// LeaseEnded turns the Lease guard around: the row must still hold
	// Lease, ended by the write (the fence of a lease expiry: a holder
	// that renewed the lease in between keeps it).
	LeaseEnded bool
}

// TaskUpdate is a task row to write back, with its guard.
type TaskUpdate struct {
	Task  Task
	Guard Guard
}
