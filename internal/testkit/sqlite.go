package testkit

import (
	"context"
	"testing"

	"github.com/flowd/flowd/store/sqlite"
)

// SQLite opens and migrates the SQLite database at url ("sqlite::memory:"
// for a throwaway one), closed with the test.
func SQLite(t testing.TB, url string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	base, err := sqlite.Open(ctx, url, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	if _, err := base.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return base
}
