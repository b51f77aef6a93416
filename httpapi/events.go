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

// PublishEventResponse answers POST /v1/events: the stored event's id and
// the instances whose waiting steps it completed (one entry per step).
type PublishEventResponse struct {
	ID        string   `json:"id"`
	Delivered []string `json:"delivered"`
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
	writeJSON(w, http.StatusAccepted, PublishEventResponse{ID: ev.Event.ID, Delivered: ev.Delivered})
}

// PublishEvent publishes the event name with key and data (nil: null) and
// returns its id and the instances whose steps it completed. Errors: 400.
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
	return &out, nil
}
