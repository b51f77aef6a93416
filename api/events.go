package api

import (
	"encoding/json"
	"time"
)

// PublishEventRequest is the body of POST /v1/events.
type PublishEventRequest struct {
	Name string          `json:"name"`
	Key  string          `json:"key,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// PublishEventResponse answers POST /v1/events: the stored event's id, the
// instances whose waiting steps it completed (one entry per step) and the
// waiting steps it could not be delivered to.
type PublishEventResponse struct {
	ID        string   `json:"id"`
	Delivered []string `json:"delivered"`
	// Failed are the steps that took the event but failed instead of
	// completing, each with the error it failed with: their instance's
	// state would be larger than its limit with the event's data.
	Failed []EventFailure `json:"failed"`
	// ExpiresAt is when the server deletes the event (its
	// --event-retention after it was published): until then a wait step
	// that starts waiting later, in a workflow created before the event
	// was published, still takes it.
	ExpiresAt time.Time `json:"expires_at"`
}

// EventFailure is a waiting step an event failed instead of completing.
type EventFailure struct {
	WorkflowID string `json:"workflow_id"`
	Step       string `json:"step"`
	Error      string `json:"error"`
}
