package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// apiError is an error that already knows its HTTP status.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func httpError(status int, msg string) error { return &apiError{status: status, msg: msg} }

// statusFor is the one table from store and domain errors to HTTP statuses.
// Handlers with route-specific meanings (412 for a lost If-Match race, 422 for a
// transition outside the table on /status) decide those before calling it.
func statusFor(err error) int {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status
	case errors.Is(err, workflow.ErrUnknownStep), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrLeaseLost),
		errors.Is(err, engine.ErrNotRunning),
		errors.Is(err, engine.ErrNonDeterminism),
		errors.Is(err, engine.ErrStepNotReady),
		errors.Is(err, engine.ErrActionNotAllowed),
		errors.Is(err, engine.ErrDefinitionDeleted),
		errors.Is(err, engine.ErrNotRerunnable),
		errors.Is(err, store.ErrExists),
		errors.Is(err, store.ErrStatusMismatch),
		errors.Is(err, store.ErrNotTerminal),
		errors.Is(err, store.ErrDefinitionInUse),
		errors.Is(err, workflow.ErrTerminal),
		errors.Is(err, workflow.ErrStepCompleted),
		errors.Is(err, workflow.ErrInvalidTransition),
		errors.Is(err, store.ErrConflict),
		errors.Is(err, store.ErrConcurrencyLimit),
		errors.Is(err, engine.ErrBulkFinished):
		return http.StatusConflict
	case errors.Is(err, store.ErrIdempotencyKeyUsed):
		return http.StatusUnprocessableEntity
	case errors.Is(err, workflow.ErrStateTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, workflow.ErrInvalidState),
		errors.Is(err, workflow.ErrInvalidID),
		errors.Is(err, workflow.ErrInvalidDefinition),
		errors.Is(err, store.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrStorageFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeJSON writes v with status; encoding errors can only be logged by then.
// writeJSON answers status with v as JSON, and its Content-Length: an
// answer flushed before the handler ends (an error answer, before the rest
// of the request's body is drained: withDiscard) keeps it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func writeErrorStatus(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: http.StatusText(status), Message: msg})
}
