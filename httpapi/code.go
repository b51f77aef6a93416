package httpapi

import (
	"bytes"
	"net/http"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// checkpoint records a step of a code workflow's run: 200 with the entry
// recorded, whether by this request or by an earlier one.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	var req CheckpointRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := workflow.ValidateStepKey(name); err != nil {
		s.fail(w, r, httpError(http.StatusBadRequest, err.Error()))
		return
	}
	rec, err := engine.RecordedOf(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entry, err := s.eng.Checkpoint(r.Context(), r.PathValue("task_id"), req.Lease, name, rec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entry)
}

// suspend ends a code workflow's run waiting for what it names.
func (s *Server) suspend(w http.ResponseWriter, r *http.Request) {
	var req SuspendRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	waits, err := engine.WaitsOf(req.Waits)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("task_id")
	if err := s.eng.Suspend(r.Context(), id, req.Lease, waits); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, SuspendResponse{TaskID: id, Status: "suspended"})
}

// setVariable is a code workflow's ctx.set: 200 with the variable.
func (s *Server) setVariable(w http.ResponseWriter, r *http.Request) {
	var req SetVariableRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(bytes.TrimSpace(req.Value)) == 0 {
		s.fail(w, r, httpError(http.StatusBadRequest, `"value" is required (any JSON; null too)`))
		return
	}
	key := r.PathValue("key")
	if err := s.eng.SetVariable(r.Context(), r.PathValue("task_id"), req.Lease, key, req.Value); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": key, "value": req.Value})
}
