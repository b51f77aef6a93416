package api

import "encoding/json"

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
}

// EventFailure is a waiting step an event failed instead of completing.
type EventFailure struct {
	WorkflowID string `json:"workflow_id"`
	Step       string `json:"step"`
	Error      string `json:"error"`
}
