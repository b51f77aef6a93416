package httpapi

import (
	"bytes"
	"net/http"
)

// setSearch is a code workflow's ctx.search: 200 with the attribute as
// set; a name or value that is not one (a string, a number or a boolean)
// is a 400, a run that no longer holds its lease a 409.
func (s *Server) setSearch(w http.ResponseWriter, r *http.Request) {
	var req SetSearchRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(bytes.TrimSpace(req.Value)) == 0 {
		s.fail(w, r, httpError(http.StatusBadRequest, `"value" is required: a string, a number or a boolean`))
		return
	}
	name := r.PathValue("name")
	if err := s.eng.SetSearch(r.Context(), r.PathValue("task_id"), req.Lease, name, req.Value); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "value": req.Value})
}
