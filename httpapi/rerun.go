package httpapi

import (
	"net/http"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// maxRerunsShown bounds the re-runs a single instance's read lists: the
// newest ones; GET /v1/workflows?rerun_of=ID pages through all of them.
const maxRerunsShown = 20

// rerunWorkflow starts a re-run of a finished instance from a step (flowd
// definitions) or a journal seq (code workflows): 201 with the new
// instance, like a start.
func (s *Server) rerunWorkflow(w http.ResponseWriter, r *http.Request) {
	var req RerunRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case req.From != "" && req.FromSeq != 0:
		s.fail(w, r, httpError(http.StatusBadRequest, `give "from" (a step of a flowd definition) or "from_seq" (a code workflow's journal seq), not both`))
		return
	case req.FromSeq < 0:
		s.fail(w, r, httpError(http.StatusBadRequest, `"from_seq" must be 1 or more`))
		return
	case req.From == "" && req.FromSeq == 0:
		s.fail(w, r, httpError(http.StatusBadRequest, `give "from", the step to re-run from (or "from_seq" for a code workflow)`))
		return
	}
	if req.ID != "" {
		if err := workflow.ValidateInstanceID(req.ID); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	inst, err := s.eng.Rerun(r.Context(), engine.RerunParams{ID: r.PathValue("id"), From: req.From, FromSeq: req.FromSeq, NewID: req.ID})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeCreated(w, http.StatusCreated, inst)
}

// showReruns lists the newest re-runs of inst on it, with one read through
// the index of re-runs; a free-form instance cannot be re-run, so it is
// not looked up.
func (s *Server) showReruns(r *http.Request, inst *workflow.Instance) error {
	if inst.Definition == "" {
		return nil
	}
	page, err := s.cfg.Store.List(r.Context(), store.ListParams{RerunOf: inst.ID, Limit: maxRerunsShown})
	if err != nil {
		return err
	}
	for _, re := range page.Instances {
		inst.Reruns = append(inst.Reruns, re.ID)
	}
	return nil
}
