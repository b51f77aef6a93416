package rules

import (
	"errors"
	"fmt"
)

// Errors of the rules; the engine returns them as they are and the API maps
// them to status codes.
var (
	// ErrLeaseLost: the lease is stale, expired or revoked, or the task is no
	// longer active. The caller's work is not recorded (fencing).
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotRunning: the instance is not RUNNING or PAUSED, so its tasks were
	// released.
	ErrNotRunning = errors.New("workflow is not running")
	// ErrStepNotReady: a step cannot be completed from outside in its status.
	ErrStepNotReady = errors.New("step cannot be completed now")
	// ErrActionNotAllowed: an action does not apply to the current status.
	ErrActionNotAllowed = errors.New("action not allowed")
)

// NotAllowedError says why an action does not apply (errors.Is
// ErrActionNotAllowed). Its message is for people: returned unwrapped.
type NotAllowedError struct{ Msg string }

func (e *NotAllowedError) Error() string        { return e.Msg }
func (e *NotAllowedError) Is(target error) bool { return target == ErrActionNotAllowed }

// VersionMismatchError: a step completed from outside named a version the
// instance is no longer at. The engine reports it as the store's conflict.
type VersionMismatchError struct {
	ID               string
	Expected, Actual int64
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("workflow %s is at version %d, not %d", e.ID, e.Actual, e.Expected)
}
