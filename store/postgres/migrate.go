package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/flowd/flowd/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate applies the embedded migrations that the database lacks; see
// store.Migrator.
//
// goose works on database/sql, so a *sql.DB over pgx's stdlib adapter is
// opened for the run and closed after it; the store's pool is not involved.
// goose's PostgreSQL session locker holds an advisory lock (per database)
// while it reads the version table and applies migrations, so nodes starting
// at once take turns: the first applies, the others then find nothing to do.
func (s *Store) Migrate(ctx context.Context) (store.MigrationReport, error) {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return store.MigrationReport{}, fmt.Errorf("postgres: migrate: %w", err)
	}
	// Checked about once a second, for at most 10 minutes: long enough for
	// another node's migrations, short enough not to stall a start-up.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600), lock.WithUnlockTimeout(1, 60))
	if err != nil {
		return store.MigrationReport{}, fmt.Errorf("postgres: migrate: %w", err)
	}

	cc := s.pool.Config().ConnConfig.Copy()
	// The caller's tracer watches the store's statements, not goose's.
	cc.Tracer = nil
	db := stdlib.OpenDB(*cc)
	defer db.Close()

	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker),
		// Only our embedded files: Go migrations registered globally by
		// some other package must never run against this schema.
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return store.MigrationReport{}, fmt.Errorf("postgres: migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return store.MigrationReport{}, fmt.Errorf("postgres: migrate: %w", interpretMigrateError(err))
	}
	var report store.MigrationReport
	for _, r := range results {
		report.Applied = append(report.Applied, store.AppliedMigration{
			Version:  r.Source.Version,
			Name:     path.Base(r.Source.Path),
			Duration: r.Duration,
		})
	}
	if report.Version, err = p.GetDBVersion(ctx); err != nil {
		return store.MigrationReport{}, fmt.Errorf("postgres: migrate: %w", interpretMigrateError(err))
	}
	return report, nil
}

// interpretMigrateError keeps goose's whole description of what failed
// (which migration, which statement) but drops the driver values from the
// chain; context errors still satisfy errors.Is.
func interpretMigrateError(err error) error {
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return &backendError{msg: err.Error(), cause: ctxErr}
		}
	}
	return &backendError{msg: err.Error()}
}
