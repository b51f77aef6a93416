package store

import (
	"errors"
	"fmt"

	"github.com/flowd/flowd/workflow"
)

// Sentinel errors of the store contract. Backends wrap them with context; callers
// test with errors.Is. Domain errors (workflow.ErrTerminal, ErrUnknownStep, …)
// come through wrapped as well.
var (
	// ErrNotFound: no instance has that id.
	ErrNotFound = errors.New("not found")
	// ErrExists: an instance with that id already exists.
	ErrExists = errors.New("already exists")
	// ErrConflict: a concurrent modification — the expected version is stale, or
	// the database aborted a transaction (serialization failure, deadlock).
	// Always safe to retry from a fresh read.
	ErrConflict = errors.New("concurrent modification")
	// ErrStaleRevision: Create under CreateParams.LatestRevision found a
	// newer revision of the definition. It is also an ErrConflict.
	ErrStaleRevision = errors.New("a newer revision of the definition exists")
	// ErrStatusMismatch: a transition's from-status is not the current status.
	ErrStatusMismatch = errors.New("status mismatch")
	// ErrInvalidArgument: a parameter is out of range (limit, isolation, …).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnavailable: the database cannot be reached or is shutting down.
	// A write whose commit was under way when the connection broke returns
	// ErrOutcomeUnknown, which is also an ErrUnavailable.
	ErrUnavailable = errors.New("database unavailable")
	// ErrOutcomeUnknown: the connection broke while the database was
	// committing a write (during COMMIT, or while running a statement that
	// commits on its own), so it may or may not have been stored. It is also
	// an ErrUnavailable. Never repeat such a write blindly: read what is
	// stored first. A plain ErrUnavailable from a write means it certainly
	// did not happen.
	ErrOutcomeUnknown = fmt.Errorf("%w: the write's outcome is unknown", ErrUnavailable)
	// ErrStorageFull: the database is out of disk space (SQLite SQLITE_FULL,
	// PostgreSQL disk_full): nothing was written. Retrying helps only once
	// space is freed.
	ErrStorageFull = errors.New("database storage is full")
	// ErrNotTerminal: DeleteInstance found the instance live (PENDING,
	// RUNNING or PAUSED): only an instance that nothing runs for any more
	// can be deleted, so nothing was deleted.
	ErrNotTerminal = errors.New("the workflow is not finished")
	// ErrDefinitionInUse: DeleteDefinition found a live instance of the
	// definition (PENDING, QUEUED, RUNNING or PAUSED): the engine still needs its
	// revision, so nothing was deleted.
	ErrDefinitionInUse = errors.New("the definition has live workflows")
	// ErrInvalidCursor: a List cursor that this store did not produce.
	ErrInvalidCursor = fmt.Errorf("%w: malformed cursor", ErrInvalidArgument)
)

// ConflictError reports a lost race and carries what a retry needs: the
// version the caller expected and the one the instance actually has (Actual is
// -1 when unknown, e.g. after a serialization failure).
type ConflictError struct {
	ID       string
	Expected int64
	Actual   int64
	// Reason is set for database-level aborts ("serialization failure",
	// "deadlock detected"); empty for a version mismatch.
	Reason string
}

func (e *ConflictError) Error() string {
	if e.Reason != "" {
		if e.ID == "" {
			return fmt.Sprintf("concurrent modification: %s", e.Reason)
		}
		return fmt.Sprintf("concurrent modification of workflow %s: %s", e.ID, e.Reason)
	}
	return fmt.Sprintf("concurrent modification of workflow %s: expected version %d, current version is %d", e.ID, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// StatusMismatchError reports a transition whose from-status did not match.
type StatusMismatchError struct {
	ID       string
	Expected workflow.Status
	Actual   workflow.Status
}

func (e *StatusMismatchError) Error() string {
	return fmt.Sprintf("workflow %s is %s, not %s", e.ID, e.Actual, e.Expected)
}

// Is makes errors.Is(err, ErrStatusMismatch) true.
func (e *StatusMismatchError) Is(target error) bool { return target == ErrStatusMismatch }

// NotFound returns an error wrapping ErrNotFound that names the instance.
func NotFound(id string) error { return fmt.Errorf("workflow %q: %w", id, ErrNotFound) }

// Retryable reports whether err is a conflict that a fresh attempt may resolve.
func Retryable(err error) bool { return errors.Is(err, ErrConflict) }
