package api

import (
	"encoding/json"
	"time"
)

// ErrorMessage is the message of a recorded error (JournalEntry.Error, a
// checkpoint's "error"): a string as it is, an object's "message" when it
// has one, else the JSON as it is.
func ErrorMessage(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}

// PollRequest is the body of POST /v1/tasks/poll.
type PollRequest struct {
	Worker       string   `json:"worker"`
	Handlers     []string `json:"handlers"`
	LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
	WaitSeconds  *float64 `json:"wait_seconds,omitempty"`
}

// TaskResponse is a task handed to a remote worker.
type TaskResponse struct {
	TaskID     string    `json:"task_id"`
	Lease      string    `json:"lease"`
	LeaseUntil time.Time `json:"lease_until"`
	WorkflowID string    `json:"workflow_id"`
	Step       string    `json:"step"`
	Handler    string    `json:"handler"`
	Attempt    int       `json:"attempt"`
	// Index is the item's index for an iteration of a foreach step.
	Index          *int            `json:"index,omitempty"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key"`
	// TraceParent is the W3C traceparent of the workflow's trace, absent
	// when it has none: a worker's spans of the attempt continue it.
	TraceParent string `json:"traceparent,omitempty"`
	// Kind is "workflow" for a run of a code workflow, "step" for a task
	// step's attempt.
	Kind string `json:"kind"`
	// Journal, for a run, is the workflow's recorded steps (state.steps):
	// what its function replays from.
	Journal json.RawMessage `json:"journal,omitempty"`
}

// CheckpointRequest is the body of POST /v1/tasks/{task_id}/steps/{name}:
// a step of a code workflow's run completed with Output, or (Error set)
// failed for good after Attempts attempts.
type CheckpointRequest struct {
	Lease    string          `json:"lease"`
	Output   json.RawMessage `json:"output,omitempty"`
	Error    json.RawMessage `json:"error,omitempty"`
	Attempts int             `json:"attempts,omitempty"`
}

// SuspendRequest is the body of POST /v1/tasks/{task_id}/suspend: the run
// ends waiting for each of Waits, by name.
type SuspendRequest struct {
	Lease string          `json:"lease"`
	Waits map[string]Wait `json:"waits"`
}

// Wait is one thing a run of a code workflow waits for: a sleep (a
// duration such as "10s"), an event with an optional key, or a child
// workflow.
type Wait struct {
	Child *ChildWait `json:"child,omitempty"`
	Sleep *string    `json:"sleep,omitempty"`
	Event *string    `json:"event,omitempty"`
	Key   string     `json:"key,omitempty"`
	// Timeout, for an event, fails the wait (error type "timeout") when
	// no event came within it.
	Timeout *string `json:"timeout,omitempty"`
}

// ChildWait is a child workflow a run starts and waits for: of the
// definition (any kind: flowd steps, Serverless Workflow or code), with
// input.
type ChildWait struct {
	Definition string          `json:"definition"`
	Input      json.RawMessage `json:"input,omitempty"`
}

// SetVariableRequest is the body of POST
// /v1/tasks/{task_id}/variables/{key}: a code workflow's ctx.set.
type SetVariableRequest struct {
	Lease string          `json:"lease"`
	Value json.RawMessage `json:"value"`
}

// SetSearchRequest is the body of POST /v1/tasks/{task_id}/search/{name}:
// a code workflow's ctx.search (value: a string, a number or a boolean).
type SetSearchRequest struct {
	Lease string          `json:"lease"`
	Value json.RawMessage `json:"value"`
}

// SuspendResponse answers suspend.
type SuspendResponse struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
}

// CompleteTaskRequest is the body of POST /v1/tasks/{task_id}/complete.
type CompleteTaskRequest struct {
	Lease  string          `json:"lease"`
	Output json.RawMessage `json:"output"`
}

// FailTaskRequest is the body of POST /v1/tasks/{task_id}/fail.
type FailTaskRequest struct {
	Lease     string `json:"lease"`
	Error     string `json:"error"`
	Retryable *bool  `json:"retryable"`
}

// HeartbeatRequest is the body of POST /v1/tasks/{task_id}/heartbeat.
type HeartbeatRequest struct {
	Lease        string   `json:"lease"`
	LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
}

// TaskResultResponse answers complete and fail.
type TaskResultResponse struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
}

// HeartbeatResponse answers heartbeat.
type HeartbeatResponse struct {
	TaskID     string    `json:"task_id"`
	LeaseUntil time.Time `json:"lease_until"`
}

// Worker is a remote worker or an in-process pool seen polling: Node is the
// flowd node that served its polls (for a pool, the node it runs on).
type Worker struct {
	Worker     string    `json:"worker"`
	Handlers   []string  `json:"handlers"`
	Node       string    `json:"node"`
	LastPollAt time.Time `json:"last_poll_at"`
	// InFlight is how many tasks are leased to the worker now (by its
	// name, on any node).
	InFlight int `json:"in_flight"`
}

// ListWorkersResponse is the body of GET /v1/workers.
type ListWorkersResponse struct {
	Workers []Worker `json:"workers"`
}

// JournalEntry is one recorded entry of a code workflow (state.steps.NAME
// of its instance, an element of a run's journal): a step COMPLETED with
// its output or FAILED with its error, a sleep or event wait (WAITING, then
// COMPLETED; an event's data is its output).
type JournalEntry struct {
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	// Error is a failed step's error: its message (a string), or an
	// object with its "type" (an event wait's timeout: "timeout") and
	// "message".
	Error    json.RawMessage `json:"error,omitempty"`
	Attempts int             `json:"attempts,omitempty"`
	// Kind is "step", "sleep" or "event"; Seq numbers the entries in the
	// order they were recorded.
	Kind string `json:"kind,omitempty"`
	Seq  int    `json:"seq,omitempty"`
	// Finished numbers the waits in the order they finished.
	Finished int `json:"finished,omitempty"`
}
