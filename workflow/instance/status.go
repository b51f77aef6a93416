// Package instance holds a workflow instance as stored and as the API shows
// it: the instance, its state document, statuses and the transition table,
// step statuses and the id rules. Package workflow gives these the names the
// engine and stores use.
//
// It is pure: no I/O, no SQL, no HTTP, and it imports nothing of ours, so API
// clients and workers can use it without linking the server.
package instance

import (
	"encoding/json"
	"fmt"
)

// Status is the lifecycle status of a workflow instance.
type Status string

// The instance statuses.
const (
	StatusPending Status = "PENDING"
	// StatusQueued: an instance of a definition with a concurrency limit
	// that was started while its key had no free slot; it has no task and
	// starts (RUNNING) when a slot frees, oldest first.
	StatusQueued    Status = "QUEUED"
	StatusRunning   Status = "RUNNING"
	StatusPaused    Status = "PAUSED"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
	StatusTimedOut  Status = "TIMED_OUT"
)

// Statuses lists every instance status in lifecycle order.
var Statuses = []Status{
	StatusPending, StatusQueued, StatusRunning, StatusPaused, StatusCompleted,
	StatusFailed, StatusCancelled, StatusTimedOut,
}

// transitions is the whole transition table: anything not listed is rejected.
var transitions = map[Status][]Status{
	StatusPending:  {StatusRunning, StatusCancelled},
	StatusQueued:   {StatusRunning, StatusCancelled},
	StatusRunning:  {StatusPaused, StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut},
	StatusPaused:   {StatusRunning, StatusCancelled, StatusTimedOut},
	StatusFailed:   {StatusRunning},
	StatusTimedOut: {StatusRunning},
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether no transition and no state change is allowed from s.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusCancelled }

// StopsSteps reports whether an instance that moves to s stops its steps:
// COMPLETED, CANCELLED, FAILED and TIMED_OUT. Nothing runs any more for such
// an instance, so a step still shown RUNNING or WAITING would be a lie; the
// write that moves it there applies State.CancelActiveSteps. COMPLETED is
// included although the engine completes an instance only when every step is
// done: a status change forced through the API must not leave a step
// running under a finished instance either.
func (s Status) StopsSteps() bool {
	return s == StatusCompleted || s == StatusCancelled || s == StatusFailed || s == StatusTimedOut
}

// StopStatuses lists the statuses for which Status.StopsSteps is true, for
// stores that apply CancelActiveSteps in SQL.
var StopStatuses = []Status{StatusCompleted, StatusCancelled, StatusFailed, StatusTimedOut}

// HoldsSlot reports whether an instance in status s holds one of its
// concurrency key's slots: RUNNING and PAUSED do, so that a resume never
// takes a slot that another instance got meanwhile. Every write that moves an
// instance from a status that holds none into one that does is checked
// against the key's limit.
func (s Status) HoldsSlot() bool { return s == StatusRunning || s == StatusPaused }

// SlotStatuses lists the statuses for which Status.HoldsSlot is true.
var SlotStatuses = []Status{StatusRunning, StatusPaused}

// CanTransition reports whether from → to is in the transition table.
func CanTransition(from, to Status) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// ParseStatus returns the status named s, or an error naming the valid ones.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown status %q (want one of %v)", s, Statuses)
	}
	return st, nil
}

// UnmarshalJSON rejects unknown status names, so a decoded Status is always valid.
func (s *Status) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("status must be a string: %w", err)
	}
	st, err := ParseStatus(str)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// StepStatus is the status of one step inside an instance's state.
type StepStatus string

// The step statuses.
const (
	StepPending   StepStatus = "PENDING"
	StepRunning   StepStatus = "RUNNING"
	StepWaiting   StepStatus = "WAITING"
	StepCompleted StepStatus = "COMPLETED"
	StepFailed    StepStatus = "FAILED"
	StepSkipped   StepStatus = "SKIPPED"
	// StepCancelled: the step was RUNNING or WAITING when its instance
	// stopped (CancelActiveSteps); a retry runs it again.
	StepCancelled StepStatus = "CANCELLED"
)

// StepStatuses lists every step status.
var StepStatuses = []StepStatus{StepPending, StepRunning, StepWaiting, StepCompleted, StepFailed, StepSkipped, StepCancelled}

// Active reports whether a step with status s is in progress: RUNNING or
// WAITING. No step of a stopped instance (Status.StopsSteps) is active.
func (s StepStatus) Active() bool { return s == StepRunning || s == StepWaiting }

// ActiveStepStatuses lists the statuses for which StepStatus.Active is true,
// for stores that apply CancelActiveSteps in SQL.
var ActiveStepStatuses = []StepStatus{StepRunning, StepWaiting}

// Valid reports whether s is one of the known step statuses.
func (s StepStatus) Valid() bool {
	for _, v := range StepStatuses {
		if s == v {
			return true
		}
	}
	return false
}
