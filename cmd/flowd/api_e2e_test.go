package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi/apitest"
	"github.com/flowd/flowd/internal/pgtest"
)

// TestServeAPI runs the whole API suite against the real `flowd serve` — its
// flags, store, engine, metrics and middleware as wired here — on SQLite and
// on the test PostgreSQL.
func TestServeAPI(t *testing.T) {
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, newDB := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			apitest.Run(t, func(t *testing.T, tokens ...string) string {
				args := []string{"--db", newDB(t)}
				if len(tokens) > 0 {
					f := filepath.Join(t.TempDir(), "tokens")
					if err := os.WriteFile(f, []byte(strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					args = append(args, "--token-file", f)
				}
				url, _ := startServe(t, args...)
				return url
			})
		})
	}
}
