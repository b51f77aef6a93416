package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/flowd/flowd/store"
)

// deleteWorkflow answers DELETE /v1/workflows/{id}: 204 once a finished
// instance is gone with its history and tasks, and its child workflows
// with theirs. Errors in PATCH's order: 428 (no If-Match), 400 (malformed
// If-Match), 404, 409 (the instance is live: PENDING, QUEUED, RUNNING or
// PAUSED), 412 (no tag matches); then 409 naming a child workflow that is
// not finished, when nothing is deleted. The store checks
// the status and the version in the delete itself, so a retry that makes
// the instance RUNNING again meanwhile turns the delete into a 409 (or a
// 412), never into the loss of a running workflow.
func (s *Server) deleteWorkflow(w http.ResponseWriter, r *http.Request) {
	cond, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	if cond.Any {
		err = s.cfg.Store.DeleteInstance(r.Context(), id, nil)
	} else {
		err = s.conditionalDelete(r, id, cond)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// conditionalDelete reads the instance to learn which version If-Match
// names, then deletes at that version. A finished instance changes only by
// a retry (which makes it live), so a lost race is decided again on a fresh
// read: 409 for a live instance, 412 for a version that no longer matches.
func (s *Server) conditionalDelete(r *http.Request, id string, cond Precondition) error {
	for range maxConditionalAttempts {
		inst, err := s.cfg.Store.Get(r.Context(), id)
		if err != nil {
			return err
		}
		if err := store.CheckDeletable(id, inst.Status, inst.Version, nil); err != nil {
			return err
		}
		if !cond.MatchStrong(inst.Version) {
			return preconditionFailed(inst)
		}
		err = s.cfg.Store.DeleteInstance(r.Context(), id, &inst.Version)
		if ce := (*store.ConflictError)(nil); errors.As(err, &ce) && ce.Reason == "" {
			continue
		}
		return err
	}
	return httpError(http.StatusServiceUnavailable, "the workflow kept changing under this request; try again")
}

// deleteDefinition answers DELETE /v1/definitions/{name}: 204 once every
// revision is gone, 404 for an unknown name, 409 while an instance of the
// definition is live (checked atomically with the delete). Finished
// instances of it stay readable; their revision is gone.
func (s *Server) deleteDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.eng.DeleteDefinition(r.Context(), name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		err = httpError(http.StatusNotFound, fmt.Sprintf("unknown definition %q", name))
	case errors.Is(err, store.ErrDefinitionInUse):
		err = httpError(http.StatusConflict, fmt.Sprintf(
			"definition %q has workflows that are not finished (PENDING, QUEUED, RUNNING or PAUSED); cancel them, or wait until they finish, then delete it", name))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
