package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/flowd/flowd/engine/rules"
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
	if req.Attempts < 0 {
		s.fail(w, r, httpError(http.StatusBadRequest, `"attempts" must not be negative`))
		return
	}
	rec := rules.Recorded{Output: req.Output, Attempts: req.Attempts}
	if e := req.Error; len(e) > 0 && !isNull(e) {
		// A null output, as a null error, is none.
		if len(req.Output) > 0 && !isNull(req.Output) {
			s.fail(w, r, httpError(http.StatusBadRequest, `a step has "output" or "error", not both`))
			return
		}
		rec.Failed, rec.Error = true, errorText(e)
	}
	entry, err := s.eng.Checkpoint(r.Context(), r.PathValue("task_id"), req.Lease, name, rec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entry)
}

// errorText is a step's error as recorded: a string as it is; an object's
// "message" when it has one, else the object's JSON.
func errorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}

// suspend ends a code workflow's run waiting for what it names.
func (s *Server) suspend(w http.ResponseWriter, r *http.Request) {
	var req SuspendRequest
	if err := decodeLeased(r, &req, &req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Waits) == 0 {
		s.fail(w, r, httpError(http.StatusBadRequest, `"waits" must name at least one thing the run waits for`))
		return
	}
	waits := make(map[string]rules.Wait, len(req.Waits))
	for name, wt := range req.Waits {
		wait, err := waitOf(name, wt)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		waits[name] = wait
	}
	id := r.PathValue("task_id")
	if err := s.eng.Suspend(r.Context(), id, req.Lease, waits); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, SuspendResponse{TaskID: id, Status: "suspended"})
}

// waitOf checks one wait of a suspend.
func waitOf(name string, wt Wait) (rules.Wait, error) {
	if err := workflow.ValidateStepKey(name); err != nil {
		return rules.Wait{}, httpError(http.StatusBadRequest, fmt.Sprintf("waits: %v", err))
	}
	switch {
	case wt.Sleep != nil && wt.Event != nil:
		return rules.Wait{}, httpError(http.StatusBadRequest, fmt.Sprintf("waits.%s: a wait is a sleep or an event, not both", name))
	case wt.Sleep != nil:
		d, err := time.ParseDuration(*wt.Sleep)
		if err != nil || d < 0 {
			return rules.Wait{}, httpError(http.StatusBadRequest, fmt.Sprintf(`waits.%s.sleep: %q is not a duration such as "10s", "5m" or "1h30m"`, name, *wt.Sleep))
		}
		return rules.Wait{Sleep: d}, nil
	case wt.Event != nil:
		if p := workflow.EventNameProblem(*wt.Event); p != "" {
			return rules.Wait{}, httpError(http.StatusBadRequest, fmt.Sprintf("waits.%s.event %s", name, p))
		}
		if len([]rune(wt.Key)) > workflow.MaxEventKeyLength {
			return rules.Wait{}, httpError(http.StatusBadRequest, fmt.Sprintf("waits.%s.key is longer than %d characters", name, workflow.MaxEventKeyLength))
		}
		return rules.Wait{Event: *wt.Event, Key: wt.Key}, nil
	}
	return rules.Wait{}, httpError(http.StatusBadRequest, fmt.Sprintf(`waits.%s: say what the run waits for: {"sleep": "10s"} or {"event": "name", "key": "..."}`, name))
}
