package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/pressly/goose/v3"

	"github.com/flowd/flowd/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// maxMigrateAttempts bounds the retries of Migrate after losing a race (see
// Migrate); each retry is caused by another process making progress.
const maxMigrateAttempts = 5

// Migrate applies the embedded migrations that are not applied yet.
//
// Goose runs on the write pool, so within one Store it is serialised with
// every write; each migration is one BEGIN IMMEDIATE transaction (DDL is
// transactional in SQLite), so a migration is applied whole or not at all.
// SQLite has no advisory lock, and goose decides what is pending before it
// takes the write lock, so two processes migrating a fresh file at once may
// both try the same migration. The loser's transaction fails (its CREATE
// finds the table) and rolls back; Migrate then checks whether the version it
// failed on is now recorded — applied by the other process — and if so starts
// over, finding nothing (or only later migrations) pending. A migration that
// fails on its own is reported, not retried. Goose itself retries creating
// its version table when another process created it first (after a second's
// pause, only on a fresh database).
func (s *Store) Migrate(ctx context.Context) (store.MigrationReport, error) {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return store.MigrationReport{}, fmt.Errorf("sqlite: migrate: %w", err)
	}
	report := store.MigrationReport{Applied: []store.AppliedMigration{}}
	for attempt := 1; ; attempt++ {
		// A fresh provider per attempt: a provider remembers that it has
		// ensured its version table, even when that failed.
		p, err := s.migrationProvider(fsys)
		if err != nil {
			return report, fmt.Errorf("sqlite: migrate: %w", err)
		}
		if err := s.versionsOnce(ctx, p); err != nil {
			if attempt < maxMigrateAttempts && errors.Is(err, store.ErrConflict) && ctx.Err() == nil {
				continue
			}
			return report, fmt.Errorf("sqlite: migrate: %w", err)
		}
		results, err := p.Up(ctx)
		report.Applied = appendApplied(report.Applied, results)
		if err == nil {
			v, err := p.GetDBVersion(ctx)
			if err != nil {
				return report, fmt.Errorf("sqlite: migrate: schema version: %w", interpretError(ctx, err))
			}
			report.Version = v
			return report, nil
		}
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			report.Applied = appendApplied(report.Applied, partial.Applied)
		}
		if attempt < maxMigrateAttempts && s.lostRace(ctx, p, err, partial) {
			continue
		}
		return report, fmt.Errorf("sqlite: migrate: %w", interpretError(ctx, err))
	}
}

// versionsOnce makes the version table refuse a version recorded twice:
// a migration that another process applied between goose's look at the
// table and this process's transaction then fails here (its transaction
// rolled back, lostRace), even when its statements could run twice — a
// data migration that only updates rows would otherwise be applied, and
// recorded, once per process.
func (s *Store) versionsOnce(ctx context.Context, p *goose.Provider) error {
	if _, err := p.GetDBVersion(ctx); err != nil { // creates the table
		return interpretError(ctx, err)
	}
	_, err := s.writeDB.ExecContext(ctx, `CREATE UNIQUE INDEX IF NOT EXISTS flowd_goose_version_once ON goose_db_version (version_id)`)
	return interpretError(ctx, err)
}

// lostRace reports whether Up failed because another process was migrating
// the same database at the same time, so that running Up again is right.
func (s *Store) lostRace(ctx context.Context, p *goose.Provider, err error, partial *goose.PartialError) bool {
	if ctx.Err() != nil {
		return false
	}
	// The write lock was busy for longer than busy_timeout.
	if errors.Is(interpretError(ctx, err), store.ErrConflict) {
		return true
	}
	if partial == nil || partial.Failed == nil || partial.Failed.Source == nil {
		return false
	}
	// The migration that failed here has been recorded as applied: another
	// process applied it between goose's look at the version table and this
	// process's transaction.
	current, verr := p.GetDBVersion(ctx)
	return verr == nil && current >= partial.Failed.Source.Version
}

// migrationProvider is goose over the embedded SQL files and the Go
// migrations (migrate_history.go).
func (s *Store) migrationProvider(fsys fs.FS) (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectSQLite3, s.writeDB, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(historyPatchesMigration(), concurrencyMigration()))
}

func appendApplied(applied []store.AppliedMigration, results []*goose.MigrationResult) []store.AppliedMigration {
	for _, r := range results {
		if r == nil || r.Source == nil {
			continue
		}
		applied = append(applied, store.AppliedMigration{
			Version:  r.Source.Version,
			Name:     filepath.Base(r.Source.Path),
			Duration: r.Duration,
		})
	}
	return applied
}
