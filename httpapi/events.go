package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/flowd/flowd/workflow"
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
}

// EventFailure is a waiting step an event failed instead of completing.
type EventFailure struct {
	WorkflowID string `json:"workflow_id"`
	Step       string `json:"step"`
	Error      string `json:"error"`
}

// publishEvent is POST /v1/events: 202 once the event is stored and
// delivered to every step waiting for it.
func (s *Server) publishEvent(w http.ResponseWriter, r *http.Request) {
	var req PublishEventRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if msg := workflow.EventNameProblem(req.Name); msg != "" {
		s.fail(w, r, httpError(http.StatusBadRequest, "name "+msg))
		return
	}
	if n := utf8.RuneCountInString(req.Key); n > workflow.MaxEventKeyLength {
		s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("key has %d characters, more than %d", n, workflow.MaxEventKeyLength)))
		return
	}
	if !utf8.ValidString(req.Key) {
		s.fail(w, r, httpError(http.StatusBadRequest, "key is not valid UTF-8"))
		return
	}
	ev, err := s.eng.PublishEvent(r.Context(), req.Name, req.Key, req.Data)
	if ev == nil {
		s.fail(w, r, err)
		return
	}
	if err != nil {
		// Stored: the waiters it did not reach yet take it from the store
		// (the sweeper looks them up), so the publish itself succeeded.
		s.log.Warn("event published, delivery incomplete", "event", ev.Event.ID, "err", err)
	}
	failed := make([]EventFailure, len(ev.Failed))
	for i, f := range ev.Failed {
		failed[i] = EventFailure{WorkflowID: f.WorkflowID, Step: f.Step, Error: f.Error}
	}
	writeJSON(w, http.StatusAccepted, PublishEventResponse{ID: ev.Event.ID, Delivered: ev.Delivered, Failed: failed})
}

// PublishEvent publishes the event name with key and data (nil: null) and
// returns its id, the instances whose steps it completed and the steps it
// failed instead (Failed). Errors: 400.
func (c *Client) PublishEvent(ctx context.Context, name, key string, data json.RawMessage) (*PublishEventResponse, error) {
	body, err := json.Marshal(PublishEventRequest{Name: name, Key: key, Data: data})
	if err != nil {
		return nil, fmt.Errorf("flowd client: encoding event: %w", err)
	}
	var out PublishEventResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/events", nil, body, "application/json", &out); err != nil {
		return nil, err
	}
	if out.Delivered == nil {
		out.Delivered = []string{}
	}
	if out.Failed == nil {
		out.Failed = []EventFailure{}
	}
	return &out, nil
}
