package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// idempotencyKey reads the Idempotency-Key header: "" when absent, 400 when
// given twice or not 1–255 printable ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(IdempotencyKeyHeader)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", httpError(http.StatusBadRequest, "Idempotency-Key: give one key, not "+fmt.Sprint(len(vals)))
	}
	if err := store.ValidateIdempotencyKey(vals[0]); err != nil {
		return "", httpError(http.StatusBadRequest, "Idempotency-Key: "+err.Error())
	}
	return vals[0], nil
}

// requestHash identifies a create request for its idempotency key: the
// SHA-256 of its canonical form, the JSON object of "definition", "id",
// "input" and "state" with the keys of every object sorted and no
// insignificant whitespace; an absent or null "input" or "state" counts as
// {}. So a repeat is recognised whatever the order of its keys and its
// spacing, while any change of a value (a number written differently
// included) makes another request. Headers are not part of it.
func requestHash(req CreateWorkflowRequest) (string, error) {
	input, err := canonicalJSON(req.Input)
	if err != nil {
		return "", err
	}
	state, err := canonicalJSON(req.State)
	if err != nil {
		return "", err
	}
	// Search attributes count when given (and leave the hash of a
	// request without them as it was).
	var search json.RawMessage
	if len(req.Search) > 0 {
		b, err := json.Marshal(req.Search) // sorted keys
		if err != nil {
			return "", err
		}
		if search, err = canonicalJSON(b); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(struct {
		Definition string          `json:"definition"`
		ID         string          `json:"id"`
		Input      json.RawMessage `json:"input"`
		State      json.RawMessage `json:"state"`
		Search     json.RawMessage `json:"search,omitempty"`
	}{req.Definition, req.ID, input, state, search})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON re-encodes raw with sorted object keys, numbers as written;
// empty or null is {}.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, httpError(http.StatusBadRequest, "invalid JSON body: "+describeJSONError(err))
	}
	return json.Marshal(v) // map keys sorted
}

// repeatedCreate answers a create whose idempotency key is taken: the
// instance the key's first request created, as it is now (200), or 422
// when the key came with another request.
func (s *Server) repeatedCreate(w http.ResponseWriter, r *http.Request, ke *store.IdempotencyKeyError) {
	if !ke.SameRequest {
		s.fail(w, r, httpError(http.StatusUnprocessableEntity, fmt.Sprintf(
			"Idempotency-Key %q was used within the last 24 hours for a different request (it created workflow %s); use a new key for a new request",
			ke.Key, ke.WorkflowID)))
		return
	}
	inst, err := s.cfg.Store.GetWithAttemptsInFlight(r.Context(), ke.WorkflowID)
	if errors.Is(err, store.ErrNotFound) {
		// Deleting an instance deletes its key, so only a race gets here.
		err = &store.ConflictError{ID: ke.WorkflowID, Actual: -1, Reason: "the instance of this idempotency key was just deleted; try again"}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeCreated(w, http.StatusOK, inst)
}

// writeCreated answers a create, or its repeat, with the instance.
func writeCreated(w http.ResponseWriter, status int, inst *workflow.Instance) {
	w.Header().Set("Location", "/v1/workflows/"+inst.ID)
	writeInstance(w, status, inst)
}
