package postgres

import (
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/store"
)

// disk_full is the store's ErrStorageFull: not a conflict to retry, and not
// an unreachable database.
func TestDiskFullIsStorageFull(t *testing.T) {
	err := interpretError(&pgconn.PgError{Code: "53100", Message: `could not extend file "base/1/2": No space left on device`}, "w")
	if !errors.Is(err, store.ErrStorageFull) {
		t.Fatalf("53100 → %v, want ErrStorageFull", err)
	}
	if errors.Is(err, store.ErrUnavailable) || store.Retryable(err) {
		t.Errorf("53100 → %v: must not read as unavailable or retryable", err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		t.Error("the pgx error type leaks out of the store")
	}
}

// refusedError is a dial that failed before anything was sent, as pgx
// marks it (SafeToRetry).
type refusedError struct{}

func (refusedError) Error() string     { return "connection refused" }
func (refusedError) Timeout() bool     { return false }
func (refusedError) Temporary() bool   { return false }
func (refusedError) SafeToRetry() bool { return true }

// A connection lost after a committing statement was sent leaves the write's
// outcome unknown; one lost before anything was sent, or an error inside a
// transaction before COMMIT, does not.
func TestCommitOutcome(t *testing.T) {
	// A real refused dial: port 1 on loopback has no server.
	_, dialErr := pgconn.Connect(t.Context(), "postgres://flowd@127.0.0.1:1/flowd?sslmode=disable&connect_timeout=5")
	var ce *pgconn.ConnectError
	if !errors.As(dialErr, &ce) {
		t.Fatalf("dialing a closed port: %v, want a *pgconn.ConnectError", dialErr)
	}
	for _, c := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"terminated backend", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"answer cut off", io.ErrUnexpectedEOF, true},
		{"nothing sent", refusedError{}, false},
		{"could not connect", dialErr, false},
	} {
		mapped := interpretError(c.err, "w")
		if !errors.Is(mapped, store.ErrUnavailable) || errors.Is(mapped, store.ErrOutcomeUnknown) {
			t.Errorf("%s: interpretError = %v, want plain ErrUnavailable (not every statement commits)", c.name, mapped)
		}
		got := commitOutcome(mapped)
		if errors.Is(got, store.ErrOutcomeUnknown) != c.unknown || !errors.Is(got, store.ErrUnavailable) {
			t.Errorf("%s: commitOutcome = %v, want outcome unknown %v (and ErrUnavailable)", c.name, got, c.unknown)
		}
	}
	if err := commitOutcome(&store.ConflictError{Actual: -1}); errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("a conflict became %v", err)
	}
}
