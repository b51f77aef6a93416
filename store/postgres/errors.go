package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/store"
)

// SQLSTATE codes the store maps to contract errors. Matched by code, never by
// message text.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUniqueViolation      = "23505"
	codeCheckViolation       = "23514"
	// disk_full: the server could not extend a file; the statement failed.
	codeDiskFull = "53100"
	// Text the database cannot store (NUL, invalid UTF-8). The store checks
	// strings before sending them; this is the backstop.
	codeCharacterNotInRepertoire = "22021"
	codeUntranslatableCharacter  = "22P05"
	// JSON that encoding/json accepts but jsonb refuses: a lone UTF-16
	// surrogate escape ("\ud800"), a number beyond numeric's range (1e1000000).
	codeInvalidTextRepresentation = "22P02"
	codeNumericValueOutOfRange    = "22003"
	// Raised by flowd_conflict (migration 00003): a write (Apply, a create
	// or write of ApplyGroup) missed after part of it matched, or missed in
	// a group, and rolled itself back with everything in its transaction.
	// With a message that starts with slotMissPrefix, the write was
	// refused by its concurrency key's limit.
	codeCommitConflict = "FD409"
)

// interpretError maps an error from pgx to the store contract, once, at the
// package boundary. id names the instance concerned ("" when none). Errors
// without a contract meaning become a *backendError that keeps the message but
// not the pgx value, so no pgx type leaves the package; context errors still
// satisfy errors.Is(err, context.Canceled / context.DeadlineExceeded).
func interpretError(err error, id string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.NotFound(id)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeSerializationFailure:
			return &store.ConflictError{ID: id, Actual: -1, Reason: "serialization failure"}
		case codeDeadlockDetected:
			return &store.ConflictError{ID: id, Actual: -1, Reason: "deadlock detected"}
		case codeCommitConflict:
			if detail, ok := strings.CutPrefix(pgErr.Message, slotMissPrefix); ok {
				return &store.ConcurrencyLimitError{ID: id, Detail: detail}
			}
			if err, ok := flowMiss(pgErr.Message); ok {
				return err
			}
			return &store.ConflictError{ID: id, Actual: -1, Reason: pgErr.Message}
		case codeDiskFull:
			return fmt.Errorf("%w: postgres: %s (SQLSTATE %s)", store.ErrStorageFull, pgErr.Message, pgErr.Code)
		case codeUniqueViolation:
			if pgErr.TableName == "workflow_tasks" {
				// A task id or (instance, step) taken; Detail names the key.
				return fmt.Errorf("task: %s: %w", pgErr.Detail, store.ErrExists)
			}
			return fmt.Errorf("workflow %q: %w", id, store.ErrExists)
		case codeCheckViolation, codeCharacterNotInRepertoire, codeUntranslatableCharacter,
			codeInvalidTextRepresentation, codeNumericValueOutOfRange:
			return fmt.Errorf("%w: %s", store.ErrInvalidArgument, pgErr.Message)
		}
		if strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") {
			// Connection exceptions and operator intervention (shutdown,
			// terminated backend, cannot connect now).
			return &unavailableError{msg: fmt.Sprintf("postgres: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code), sent: mayHaveSent(err)}
		}
		return &backendError{msg: fmt.Sprintf("postgres: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)}
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if ctx := contextCause(err); ctx != nil {
			return &backendError{msg: "postgres: " + err.Error(), cause: ctx}
		}
		return &unavailableError{msg: "postgres: " + err.Error(), sent: mayHaveSent(err)}
	}
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return &backendError{msg: "postgres: " + err.Error(), cause: ctxErr}
		}
	}
	return &backendError{msg: "postgres: " + err.Error()}
}

// unavailableError is a database that cannot be reached or a connection that
// broke (errors.Is store.ErrUnavailable). sent is false when pgx knows that
// nothing of the statement reached the server (pgconn.SafeToRetry): a
// refused connection, a pool that could not connect.
type unavailableError struct {
	msg  string
	sent bool
}

func (e *unavailableError) Error() string        { return store.ErrUnavailable.Error() + ": " + e.msg }
func (e *unavailableError) Is(target error) bool { return target == store.ErrUnavailable }

// mayHaveSent reports whether the statement that failed with err may have
// reached the server: not when the connection could not be made (a
// ConnectError, which pgx does not mark), nor when pgx says nothing was sent.
func mayHaveSent(err error) bool {
	var connectErr *pgconn.ConnectError
	return !errors.As(err, &connectErr) && !pgconn.SafeToRetry(err)
}

// commitOutcome is for the error of a statement that commits: COMMIT, a
// pipeline that ends with COMMIT, or a write outside a transaction (its own
// implicit one). When the connection broke after the statement may have
// reached the server, the server may have committed and only the answer is
// lost: store.ErrOutcomeUnknown. Any other error, and every error of a
// statement inside a transaction that has not sent COMMIT yet, means nothing
// was written. err is already mapped by interpretError.
func commitOutcome(err error) error {
	var ue *unavailableError
	if errors.As(err, &ue) && ue.sent {
		return fmt.Errorf("%w: %s", store.ErrOutcomeUnknown, ue.msg)
	}
	return err
}

// settle applies commitOutcome to *err when q runs each write as a
// transaction of its own (q is bound to the pool): deferred by the write
// methods that send their statement on q.db.
func (q *querier) settle(err *error) {
	if q.pool != nil {
		*err = commitOutcome(*err)
	}
}

// backendError is a database failure with no meaning in the store contract
// (connection lost, syntax error, …). cause is a context error, or nil.
type backendError struct {
	msg   string
	cause error
}

func (e *backendError) Error() string { return e.msg }
func (e *backendError) Unwrap() error { return e.cause }

// contextCause returns the context error inside err, if any: a timeout of
// the caller is not an unavailable database.
func contextCause(err error) error {
	for _, c := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}
