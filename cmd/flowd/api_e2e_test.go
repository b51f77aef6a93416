package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi/apitest"
	"github.com/flowd/flowd/internal/pgtest"
)

// TestServeAPI runs the API suite's wiring cases against the real `flowd
// serve` — its flags, store, engine, metrics and middleware as wired here — on
// SQLite and on the test PostgreSQL. The cases that only exercise the handler
// and the store (contention, size limits, paging, hostile JSON) run once per
// store in httpapi's TestAPI, against the same handler; running them here too
// cost minutes under -race and proved nothing about serve.
func TestServeAPI(t *testing.T) {
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, newDB := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			apitest.RunWiring(t, func(t *testing.T, tokens ...string) string {
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
