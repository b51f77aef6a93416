package postgres

import (
	"errors"
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
