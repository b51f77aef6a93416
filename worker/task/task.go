// Package task is the contract between flowd and a handler of task steps:
// the Task a handler receives, the Handler signature, and the Permanent
// mark of an error that retrying cannot fix. Remote workers (package
// worker) and the engine's in-process workers share it, so one handler runs
// in either; it imports nothing of ours.
package task

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Task is one attempt of a task step, as a handler receives it: the
// workflow, the step, the attempt number, the input, and the idempotency key
// to make side effects happen once although handlers run at least once.
type Task struct {
	ID         string
	WorkflowID string
	Step       string
	Handler    string
	Attempt    int
	// Index is the item's index when the task is an iteration of a foreach
	// step (the input was rendered with that item); nil otherwise.
	Index *int
	Input json.RawMessage
	// IdempotencyKey is the same for every attempt of a step
	// (workflow/step; workflow/step/index for an iteration): handlers run
	// at least once, so side effects should be keyed on it.
	IdempotencyKey string
	Lease          string
	LeaseUntil     time.Time
	// TraceParent is the W3C traceparent of the workflow's trace ("" for
	// none), for a remote worker to continue it; an in-process handler's
	// context carries the attempt's span instead.
	TraceParent string
	// Kind is KindWorkflow for a run of a code workflow, KindStep for a
	// task step's attempt.
	Kind string
	// Journal, for a run of a code workflow, is what its function replays
	// from: the workflow's recorded steps (state.steps) as delivered.
	Journal json.RawMessage
}

// ErrRunEnded: a handler of code workflow runs ended the run without an
// outcome to report: it waits (its suspend recorded that), or it lost its
// lease. The engine records nothing more for it.
var ErrRunEnded = errors.New("the run ended without an outcome to report")

// The kinds of task a worker is delivered.
const (
	KindStep     = "step"
	KindWorkflow = "workflow"
)

// Handler runs one attempt of a task step and returns its output, a JSON
// value. An error fails the attempt, which is retried per the step's retry
// policy; wrap it with Permanent to fail the step at once.
type Handler func(ctx context.Context, t Task) (json.RawMessage, error)

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the step fails at once.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
