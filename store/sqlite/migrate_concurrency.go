package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pressly/goose/v3"
)

// concurrencyVersion is the migration of definition concurrency limits: the
// QUEUED status, each instance's concurrency key and limit, and the slot
// guard (the same logical shape as the PostgreSQL migration 00013). It is
// Go, not SQL: SQLite cannot alter the CHECK constraint of the status
// column, and rebuilding workflow_instances, which other tables reference,
// would need foreign keys off. So it loosens the CHECK in the stored schema
// text, the procedure SQLite documents for changing a CHECK constraint
// (lang_altertable.html, "making other kinds of table schema changes"): the
// stored rows satisfy the new constraint, only the text changes, and the
// schema version is bumped so that every connection reloads it.
const concurrencyVersion = 11

// oldStatusCheck and newStatusCheck are the status column's list of values
// before and after the migration.
const (
	oldStatusCheck = `status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`
	newStatusCheck = `status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`
)

// concurrencyGuardMessage starts the message of the slot guard's RAISE:
// driverError maps it to a *store.ConcurrencyLimitError.
const concurrencyGuardMessage = "flowd concurrency limit"

// concurrencyUp are the statements after the CHECK change. SQLite has one
// writer at a time, so the guard's count in the writing transaction is
// exact: RUNNING and PAUSED hold a slot, a write that moves an instance into
// one of them from a status that holds none is refused when the key's
// holders reach its limit, and a new instance also while older ones of the
// key wait QUEUED (so that they start first).
var concurrencyUp = []string{
	`ALTER TABLE workflow_instances ADD COLUMN concurrency_key TEXT`,
	`ALTER TABLE workflow_instances ADD COLUMN concurrency_limit INTEGER CHECK (concurrency_limit IS NULL OR concurrency_limit >= 1)`,
	`CREATE INDEX workflow_instances_concurrency_idx ON workflow_instances (definition, concurrency_key, status, created_at, id)
    WHERE concurrency_key IS NOT NULL`,
	`CREATE TRIGGER workflow_instances_concurrency_insert BEFORE INSERT ON workflow_instances
WHEN NEW.concurrency_key IS NOT NULL AND NEW.status IN ('RUNNING', 'PAUSED')
BEGIN
    SELECT RAISE(ABORT, '` + concurrencyGuardMessage + `: the key''s slots are all held, or older instances of it wait QUEUED')
    WHERE (SELECT count(*) FROM workflow_instances
           WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key
             AND status IN ('RUNNING', 'PAUSED') AND id <> NEW.id) >= NEW.concurrency_limit
       OR EXISTS (SELECT 1 FROM workflow_instances
           WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key AND status = 'QUEUED');
END`,
	`CREATE TRIGGER workflow_instances_concurrency_update BEFORE UPDATE OF status ON workflow_instances
WHEN NEW.concurrency_key IS NOT NULL AND NEW.status IN ('RUNNING', 'PAUSED') AND OLD.status NOT IN ('RUNNING', 'PAUSED')
BEGIN
    SELECT RAISE(ABORT, '` + concurrencyGuardMessage + `: the key''s slots are all held')
    WHERE (SELECT count(*) FROM workflow_instances
           WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key
             AND status IN ('RUNNING', 'PAUSED') AND id <> NEW.id) >= NEW.concurrency_limit;
END`,
}

var concurrencyDown = []string{
	`DROP TRIGGER workflow_instances_concurrency_update`,
	`DROP TRIGGER workflow_instances_concurrency_insert`,
	`DROP INDEX workflow_instances_concurrency_idx`,
	`ALTER TABLE workflow_instances DROP COLUMN concurrency_limit`,
	`ALTER TABLE workflow_instances DROP COLUMN concurrency_key`,
}

func concurrencyMigration() *goose.Migration {
	m := goose.NewGoMigration(concurrencyVersion,
		&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
			// The columns first: should another process have applied this
			// migration meanwhile, this fails before the schema text is
			// touched, and Migrate sees that it lost the race.
			if err := execAll(ctx, tx, concurrencyUp[:2]); err != nil {
				return err
			}
			if err := replaceStatusCheck(ctx, tx, oldStatusCheck, newStatusCheck); err != nil {
				return err
			}
			return execAll(ctx, tx, concurrencyUp[2:])
		}},
		&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
			if err := execAll(ctx, tx, concurrencyDown); err != nil {
				return err
			}
			return replaceStatusCheck(ctx, tx, newStatusCheck, oldStatusCheck)
		}})
	m.Source = "00011_definition_concurrency.go"
	return m
}

func execAll(ctx context.Context, tx *sql.Tx, stmts []string) error {
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("concurrency migration: %w", err)
		}
	}
	return nil
}

// replaceStatusCheck rewrites the status CHECK of workflow_instances in the
// stored schema from old to new and bumps the schema version.
func replaceStatusCheck(ctx context.Context, tx *sql.Tx, old, new string) error {
	var text string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'workflow_instances'`).Scan(&text); err != nil {
		return fmt.Errorf("concurrency migration: %w", err)
	}
	if strings.Count(text, old) != 1 {
		return fmt.Errorf("concurrency migration: the status check of workflow_instances is not %s", old)
	}
	var version int64
	if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("concurrency migration: %w", err)
	}
	if err := execAll(ctx, tx, []string{`PRAGMA writable_schema = ON`}); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sqlite_schema SET sql = replace(sql, ?1, ?2) WHERE type = 'table' AND name = 'workflow_instances'`, old, new); err != nil {
		return fmt.Errorf("concurrency migration: %w", err)
	}
	return execAll(ctx, tx, []string{fmt.Sprintf(`PRAGMA schema_version = %d`, version+1), `PRAGMA writable_schema = OFF`})
}
