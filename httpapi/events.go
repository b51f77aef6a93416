package httpapi

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/flowd/flowd/workflow"
)

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
	writeJSON(w, http.StatusAccepted, PublishEventResponse{ID: ev.Event.ID, Delivered: ev.Delivered, Failed: failed, ExpiresAt: ev.ExpiresAt})
}
