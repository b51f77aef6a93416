package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// maxConditionalAttempts bounds how often a conditional write re-reads after
// losing a race to a concurrent writer whose new version still satisfies the
// request's If-Match (a list naming the newer version too). If-Match: * never
// gets here: it takes the locking path (lockedWrite), which cannot lose a race.
const maxConditionalAttempts = 16

func writeInstance(w http.ResponseWriter, status int, inst *workflow.Instance) {
	w.Header().Set("ETag", ETag(inst.Version))
	inst.ShowError()
	writeJSON(w, status, inst)
}

func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req CreateWorkflowRequest
	if err := decodeControl(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkInput(req.Input); err != nil {
		s.fail(w, r, err)
		return
	}
	priority, err := startPriority(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := workflow.CheckSearch(req.Search); err != nil {
		s.fail(w, r, httpError(http.StatusBadRequest, `"search": `+err.Error()))
		return
	}
	state, err := workflow.ParseState(req.State)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var hash string
	if key != "" {
		if hash, err = requestHash(req); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	var inst *workflow.Instance
	if req.Definition != "" {
		p := engine.StartParams{ID: req.ID, Definition: req.Definition, Input: req.Input, IdempotencyKey: key, RequestHash: hash, Priority: priority, Search: req.Search}
		if len(req.State) > 0 {
			// Variables and other keys; the steps are the definition's.
			if len(state.Steps) > 0 {
				s.fail(w, r, httpError(http.StatusBadRequest, `"state.steps" cannot be given with "definition": the definition's steps make them (give "variables" or other keys)`))
				return
			}
			p.State = &state
		}
		if req.ID != "" {
			if err := workflow.ValidateInstanceID(req.ID); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		inst, err = s.eng.StartWorkflow(r.Context(), p)
		if errors.Is(err, store.ErrNotFound) {
			err = httpError(http.StatusNotFound, fmt.Sprintf("unknown definition %q", req.Definition))
		}
	} else if err = s.eng.CheckStateSize(state); err == nil {
		inst, err = s.cfg.Store.Create(r.Context(), store.CreateParams{ID: req.ID, Input: req.Input, State: state,
			IdempotencyKey: key, RequestHash: hash, Priority: priority, Search: req.Search})
	}
	if ke := (*store.IdempotencyKeyError)(nil); errors.As(err, &ke) {
		s.repeatedCreate(w, r, ke)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeCreated(w, http.StatusCreated, inst)
}

// checkInput requires a workflow's input to be a JSON object: templates
// and handlers read its keys. Absent or null means {}.
func checkInput(input json.RawMessage) error {
	t := bytes.TrimSpace(input)
	if len(t) == 0 || string(t) == "null" || t[0] == '{' {
		return nil
	}
	return httpError(http.StatusBadRequest, `"input" must be a JSON object (or null or absent for {}), not `+describeValue(t))
}

// describeValue names the kind of a JSON value for messages.
func describeValue(v []byte) string {
	switch v[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	var inm *Precondition
	if vals := r.Header.Values("If-None-Match"); len(vals) > 0 {
		p, err := ParsePrecondition(strings.Join(vals, ", "))
		if err != nil {
			s.fail(w, r, httpError(http.StatusBadRequest, "If-None-Match: "+err.Error()))
			return
		}
		inm = &p
	}
	inst, err := s.cfg.Store.GetWithAttemptsInFlight(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if inm != nil && inm.MatchWeak(inst.Version) {
		w.Header().Set("ETag", ETag(inst.Version))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if err := s.showReruns(r, inst); err != nil {
		s.fail(w, r, err)
		return
	}
	writeInstance(w, http.StatusOK, inst)
}

// ifMatch reads the If-Match header of a conditional write: missing → 428,
// malformed → 400.
func ifMatch(r *http.Request) (Precondition, error) {
	vals := r.Header.Values("If-Match")
	if len(vals) == 0 {
		return Precondition{}, httpError(http.StatusPreconditionRequired, `this route requires an If-Match header with the workflow's ETag (e.g. If-Match: "3"), or * for any version`)
	}
	p, err := ParsePrecondition(strings.Join(vals, ", "))
	if err != nil {
		return Precondition{}, httpError(http.StatusBadRequest, "If-Match: "+err.Error())
	}
	return p, nil
}

func preconditionFailed(inst *workflow.Instance) error {
	return httpError(http.StatusPreconditionFailed, fmt.Sprintf("workflow %s is at version %d (ETag %s); If-Match does not match it", inst.ID, inst.Version, ETag(inst.Version)))
}

// conditionalWrite runs the read → check → write cycle of PATCH and step
// completion. check reports what the route itself refuses (an unknown step: 404;
// a completed one: 409), then a terminal instance is refused (409), and only then
// does If-Match decide (412), in the documented order of errors; write performs the
// versioned write at the version read. A write that loses a race starts over,
// so a request whose If-Match still matches the newer version succeeds.
func (s *Server) conditionalWrite(r *http.Request, id string, cond Precondition,
	check func(*workflow.Instance) error,
	write func(*workflow.Instance) (*workflow.Instance, error),
) (*workflow.Instance, error) {
	for range maxConditionalAttempts {
		inst, err := s.cfg.Store.Get(r.Context(), id)
		if err != nil {
			return nil, err
		}
		if err := check(inst); err != nil {
			return nil, err
		}
		if inst.Status.Terminal() {
			return nil, fmt.Errorf("workflow %q is %s: %w", id, inst.Status, workflow.ErrTerminal)
		}
		if !cond.MatchStrong(inst.Version) {
			return nil, preconditionFailed(inst)
		}
		out, err := write(inst)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return out, err
	}
	return nil, httpError(http.StatusServiceUnavailable, "the workflow kept changing under this request; try again")
}

// lockedWrite is the If-Match: * form of a conditional write: write locks the
// row, runs check on what it holds and changes it in one transaction, so the
// request waits for concurrent writers instead of failing after some number of
// lost races (a server-side read-modify-write never answers 503 or 409 for
// contention alone). A PATCH does so in the engine's turn for the instance
// (engine.ModifyState), so that it cannot starve the engine's decisions. The locked write refuses a terminal instance before it
// runs check; a terminal instance never changes again, so check runs on a
// fresh read of it afterwards and the route's own refusals (an unknown step:
// 404) keep their place before the terminal 409.
func (s *Server) lockedWrite(r *http.Request, id string,
	check func(*workflow.Instance) error,
	write func() (*workflow.Instance, error),
) (*workflow.Instance, error) {
	out, err := write()
	if errors.Is(err, workflow.ErrTerminal) {
		if inst, gerr := s.cfg.Store.Get(r.Context(), id); gerr == nil {
			if cerr := check(inst); cerr != nil {
				return nil, cerr
			}
		}
	}
	return out, err
}

func (s *Server) patchWorkflow(w http.ResponseWriter, r *http.Request) {
	cond, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	patch, touched, err := readMergePatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := mergePatchBody.check(r); err != nil {
		s.fail(w, r, err)
		return
	}
	check := func(inst *workflow.Instance) error {
		if touched["steps"] && inst.Definition != "" {
			return engineOwnsSteps(inst)
		}
		for _, key := range []string{workflow.ServerlessStateKey, workflow.CodeStateKey} {
			if _, owned := inst.State.Extra[key]; owned && touched[key] && inst.Definition != "" {
				return engineOwnsRuntime(inst, key)
			}
		}
		return nil
	}
	id := r.PathValue("id")
	var inst *workflow.Instance
	if cond.Any {
		inst, err = s.lockedWrite(r, id, check, func() (*workflow.Instance, error) {
			return s.eng.ModifyState(r.Context(), id, func(inst *workflow.Instance) error {
				if err := check(inst); err != nil {
					return err
				}
				next, err := s.patchedState(inst.State, patch)
				inst.State = next
				return err
			}, "patch")
		})
	} else {
		inst, err = s.conditionalWrite(r, id, cond, check,
			func(inst *workflow.Instance) (*workflow.Instance, error) {
				next, err := s.patchedState(inst.State, patch)
				if err != nil {
					return nil, err
				}
				return s.eng.ReplaceState(r.Context(), inst, next, "patch")
			})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeInstance(w, http.StatusOK, inst)
}

// engineOwnsSteps refuses a PATCH that touches state.steps of a
// definition-based instance (409, decided with the terminal-instance 409,
// before If-Match): the engine schedules, retries and settles those steps
// from their statuses, so a forged status or output would run a step twice,
// skip it, or feed later steps an output no handler produced. A step is
// completed from outside through its complete route instead.
func engineOwnsSteps(inst *workflow.Instance) error {
	return httpError(http.StatusConflict, fmt.Sprintf(
		"workflow %s runs definition %q: its state.steps are owned by the engine and cannot be patched; "+
			"complete a step with POST /v1/workflows/%s/steps/{step}/complete (the patch may change every other key of state)",
		inst.ID, inst.Definition, inst.ID))
}

// engineOwnsRuntime refuses a PATCH that touches the engine's own record
// of a run — the interpreter state of a Serverless Workflow document
// (state.sw), a code workflow's runs (state.code) — (409, as for
// state.steps): it says which tasks run and what they wait for, and a
// forged one would run a task twice or never.
func engineOwnsRuntime(inst *workflow.Instance, key string) error {
	what := "Serverless Workflow document"
	if key == workflow.CodeStateKey {
		what = "code definition"
	}
	return httpError(http.StatusConflict, fmt.Sprintf(
		"workflow %s runs %s %q: its state.%s is owned by the engine and cannot be patched (the patch may change every other key of state)",
		inst.ID, what, inst.Definition, key))
}

// patchedState is applyStatePatch within the state size limit (413).
func (s *Server) patchedState(cur workflow.State, patch []byte) (workflow.State, error) {
	next, err := applyStatePatch(cur, patch)
	if err != nil {
		return workflow.State{}, err
	}
	if err := s.eng.CheckStateSize(next); err != nil {
		return workflow.State{}, err
	}
	return next, nil
}

// applyStatePatch applies a JSON Merge Patch (RFC 7396) to a state and
// validates the result; a patch that makes the state invalid is a 400.
func applyStatePatch(cur workflow.State, patch []byte) (workflow.State, error) {
	doc, err := json.Marshal(cur)
	if err != nil {
		return workflow.State{}, err
	}
	merged, err := mergePatch(doc, patch)
	if err != nil {
		return workflow.State{}, httpError(http.StatusBadRequest, "applying merge patch: "+err.Error())
	}
	next, err := workflow.ParseState(merged)
	if err != nil {
		return workflow.State{}, httpError(http.StatusBadRequest, "the patched state is invalid: "+err.Error())
	}
	return next, nil
}

// readMergePatch reads a JSON Merge Patch for the state and checks what can be
// checked without the current state, so a bad body is a 400 before any 404.
// touched holds the patch's top-level keys (a "steps" key at all, even null
// or {}, touches the steps).
func readMergePatch(r *http.Request) (patch []byte, touched map[string]bool, err error) {
	b, err := readJSONBody(r)
	if err != nil {
		return nil, nil, err
	}
	var top map[string]json.RawMessage
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &top) != nil {
		return nil, nil, httpError(http.StatusBadRequest, "the body must be a JSON object (a JSON Merge Patch of the state, RFC 7396)")
	}
	if err := validateStatePatch(top); err != nil {
		return nil, nil, httpError(http.StatusBadRequest, err.Error())
	}
	touched = make(map[string]bool, len(top))
	for k := range top {
		touched[k] = true
	}
	return b, touched, nil
}

// validateStatePatch rejects patches that could only produce an invalid state.
func validateStatePatch(top map[string]json.RawMessage) error {
	if v, ok := top["variables"]; ok && !isNullOrObject(v) {
		return errors.New("state.variables must be a JSON object (or null to clear it)")
	}
	raw, ok := top["steps"]
	if !ok || isNull(raw) {
		return nil
	}
	var steps map[string]json.RawMessage
	if !isNullOrObject(raw) || json.Unmarshal(raw, &steps) != nil {
		return errors.New("state.steps must be a JSON object (or null)")
	}
	for id, v := range steps {
		if err := workflow.ValidateStepID(id); err != nil {
			return fmt.Errorf("state.steps: %w", err)
		}
		if isNull(v) {
			continue
		}
		var fields map[string]json.RawMessage
		if !isNullOrObject(v) || json.Unmarshal(v, &fields) != nil {
			return fmt.Errorf("state.steps.%s must be a JSON object (or null to remove it)", id)
		}
		if st, ok := fields["status"]; ok && !isNull(st) {
			var name string
			if json.Unmarshal(st, &name) != nil || !workflow.StepStatus(name).Valid() {
				return fmt.Errorf("state.steps.%s.status must be one of %v", id, workflow.StepStatuses)
			}
		}
		if e, ok := fields["error"]; ok && !isNull(e) {
			var msg string
			if json.Unmarshal(e, &msg) != nil {
				return fmt.Errorf("state.steps.%s.error must be a string (or null)", id)
			}
		}
		if a, ok := fields["attempts"]; ok && !isNull(a) {
			var n int
			if json.Unmarshal(a, &n) != nil || n < 0 {
				return fmt.Errorf("state.steps.%s.attempts must be a non-negative integer", id)
			}
		}
	}
	return nil
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

func isNullOrObject(b json.RawMessage) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && (t[0] == '{' || string(t) == "null")
}

func (s *Server) completeStep(w http.ResponseWriter, r *http.Request) {
	cond, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withBody := hasBody(r)
	var req CompleteStepRequest
	if err := decodeControl(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if withBody {
		if err := jsonBody.check(r); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	id, stepID := r.PathValue("id"), r.PathValue("step")
	check := func(inst *workflow.Instance) error {
		st, ok := inst.State.Steps[stepID]
		if !ok {
			return fmt.Errorf("workflow %q has no step %q: %w", inst.ID, stepID, workflow.ErrUnknownStep)
		}
		if st.Status == workflow.StepCompleted {
			return fmt.Errorf("workflow %q step %q: %w", inst.ID, stepID, workflow.ErrStepCompleted)
		}
		if inst.Definition != "" && (st.Status == workflow.StepPending || st.Status == workflow.StepSkipped) {
			return fmt.Errorf("%w: step %q of workflow %s is %s", engine.ErrStepNotReady, stepID, inst.ID, st.Status)
		}
		return nil
	}
	var inst *workflow.Instance
	if cond.Any {
		// Without an expected version the engine completes the step under
		// the instance's row lock and checks the same refusals there.
		inst, err = s.lockedWrite(r, id, check, func() (*workflow.Instance, error) {
			return s.eng.CompleteStep(r.Context(), engine.CompleteStepParams{ID: id, Step: stepID, Output: req.Output})
		})
	} else {
		inst, err = s.conditionalWrite(r, id, cond, check,
			func(inst *workflow.Instance) (*workflow.Instance, error) {
				v := inst.Version
				return s.eng.CompleteStep(r.Context(), engine.CompleteStepParams{
					ID: inst.ID, Step: stepID, Output: req.Output, ExpectedVersion: &v,
				})
			})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeInstance(w, http.StatusOK, inst)
}

func (s *Server) transitionWorkflow(w http.ResponseWriter, r *http.Request) {
	var req TransitionRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.From == "" || req.To == "" {
		s.fail(w, r, httpError(http.StatusBadRequest, `both "from" and "to" are required`))
		return
	}
	if !workflow.CanTransition(req.From, req.To) {
		s.fail(w, r, httpError(http.StatusUnprocessableEntity, fmt.Sprintf("%s → %s is not an allowed transition", req.From, req.To)))
		return
	}
	// Through the engine: PAUSED → RUNNING resumes a definition-based
	// instance as /resume does, and so on.
	inst, err := s.eng.Transition(r.Context(), r.PathValue("id"), req.From, req.To)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeInstance(w, http.StatusOK, inst)
}

// actionHandler serves cancel, pause, resume and retry through the engine,
// which also releases, schedules or re-queues the instance's tasks.
func (s *Server) actionHandler(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var empty struct{}
		if err := decodeControl(r, &empty, true); err != nil {
			s.fail(w, r, err)
			return
		}
		inst, err := s.eng.Action(r.Context(), r.PathValue("id"), name)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeInstance(w, http.StatusOK, inst)
	}
}

func (s *Server) batchStatus(w http.ResponseWriter, r *http.Request) {
	var req BatchStatusRequest
	if err := decodeControl(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Status == "" || req.NewStatus == "" || req.UpdatedBefore == "" || req.Limit == nil {
		s.fail(w, r, httpError(http.StatusBadRequest, `"status", "updated_before", "new_status" and "limit" are required`))
		return
	}
	// RFC 3339 allows a lowercase "t" and "z"; Go's layout does not.
	before, err := time.Parse(time.RFC3339, strings.ToUpper(req.UpdatedBefore))
	if err != nil {
		s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("updated_before %q is not an RFC 3339 time (e.g. 2026-11-21T10:00:00Z)", req.UpdatedBefore)))
		return
	}
	if *req.Limit < 1 || *req.Limit > store.MaxBatchLimit {
		s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("limit must be from 1 to %d, not %d", store.MaxBatchLimit, *req.Limit)))
		return
	}
	if !workflow.CanTransition(req.Status, req.NewStatus) {
		s.fail(w, r, httpError(http.StatusUnprocessableEntity, fmt.Sprintf("%s → %s is not an allowed transition", req.Status, req.NewStatus)))
		return
	}
	// Through the engine: a batch to RUNNING resumes or retries the
	// definition-based instances it moves.
	ids, err := s.eng.BatchStatus(r.Context(), store.BatchStatusParams{
		Status: req.Status, UpdatedBefore: before, NewStatus: req.NewStatus, Limit: *req.Limit,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, BatchStatusResponse{IDs: ids})
}
