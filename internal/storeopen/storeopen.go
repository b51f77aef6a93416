// Package storeopen picks a store backend from a database URL:
// postgres:// or postgresql:// select PostgreSQL, sqlite:PATH selects SQLite.
// It only dispatches; each backend owns its own connection handling.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/dsn"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
)

// DefaultURL is the embedded default database.
const DefaultURL = "sqlite:flowd.db"

// Options apply to whichever backend is chosen.
type Options struct {
	Now func() time.Time
}

// ErrUnknownScheme is returned for a URL that names no backend.
var ErrUnknownScheme = errors.New("unsupported database URL")

// Open opens the store that url names. It does not migrate.
func Open(ctx context.Context, url string, opts Options) (store.Backend, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgres.Open(ctx, url, postgres.Options{Now: opts.Now})
	case strings.HasPrefix(url, "sqlite:"):
		return sqlite.Open(ctx, url, sqlite.Options{Now: opts.Now})
	}
	return nil, fmt.Errorf("%w %q: use postgres://… (or postgresql://…) for PostgreSQL, sqlite:PATH or sqlite::memory: for SQLite", ErrUnknownScheme, dsn.Redact(url))
}
