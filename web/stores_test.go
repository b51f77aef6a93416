package web_test

import (
	"testing"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The stores the dashboard's pages that act on the server are tried on.
var stores = []struct {
	name string
	open func(*testing.T) store.Backend
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

func openSQLite(t *testing.T) store.Backend {
	t.Helper()
	st, err := sqlite.Open(t.Context(), "sqlite:"+t.TempDir()+"/f.db", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openPostgres opens a fresh database of the test cluster (skipped without
// PostgreSQL, failed under CI=true).
func openPostgres(t *testing.T) store.Backend {
	t.Helper()
	st, err := postgres.Open(t.Context(), pgtest.NewDatabase(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
