package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/flowd/flowd/internal/jsondelta"
)

// historyPatchesVersion is the migration that turns history rows written
// whole into patches where the snapshot policy says so (see history.go). It
// is Go, not SQL: the patches are jsondelta's, computed in Go as every
// write computes them. Its Down writes every state whole again.
const historyPatchesVersion = 6

func historyPatchesMigration() *goose.Migration {
	m := goose.NewGoMigration(historyPatchesVersion,
		&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error { return rewriteHistory(ctx, tx, true) }},
		&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error { return rewriteHistory(ctx, tx, false) }})
	// The name Migrate reports, like a file's.
	m.Source = "00006_history_patches.go"
	return m
}

// errMigratedMeanwhile: another process applied the migration between
// goose's look at the version table and this transaction (see Migrate).
var errMigratedMeanwhile = errors.New("history migration already applied by another process")

// rewriteHistory rewrites the history of every instance, one version at a
// time (an instance's history can be larger than memory should hold), with
// the append-only trigger lifted for the transaction: up turns whole states
// into patch rows as jsondelta.Entry would have written them, down writes
// every state whole again.
func rewriteHistory(ctx context.Context, tx *sql.Tx, up bool) error {
	if up {
		var applied bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM goose_db_version WHERE version_id = ?1 AND is_applied)`,
			historyPatchesVersion).Scan(&applied); err != nil {
			return fmt.Errorf("history migration: %w", err)
		}
		if applied {
			return errMigratedMeanwhile
		}
	}
	ids, err := queryIDs(ctx, tx, `SELECT DISTINCT instance_id FROM workflow_history ORDER BY instance_id`)
	if err != nil {
		return fmt.Errorf("history migration: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DROP TRIGGER workflow_history_no_update`); err != nil {
		return fmt.Errorf("history migration: %w", err)
	}
	for _, id := range ids {
		if err := rewriteInstanceHistory(ctx, tx, id, up); err != nil {
			return fmt.Errorf("history migration: workflow %q: %w", id, err)
		}
	}
	_, err = tx.ExecContext(ctx, `CREATE TRIGGER workflow_history_no_update BEFORE UPDATE ON workflow_history
BEGIN
    SELECT RAISE(ABORT, 'workflow_history is append-only: UPDATE is not allowed');
END`)
	if err != nil {
		return fmt.Errorf("history migration: %w", err)
	}
	return nil
}

func rewriteInstanceHistory(ctx context.Context, tx *sql.Tx, id string, up bool) error {
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT max(version) FROM workflow_history WHERE instance_id = ?1`, id).Scan(&last); err != nil {
		return err
	}
	var prevState, prevRow []byte
	replay := jsondelta.NewReplay(jsondelta.Bytewise)
	for v := int64(0); v <= last; v++ {
		var s string
		if err := tx.QueryRowContext(ctx, `SELECT state FROM workflow_history WHERE instance_id = ?1 AND version = ?2`, id, v).Scan(&s); err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
		stored := []byte(s)
		var update []byte
		if up {
			if !jsondelta.IsSnapshot(stored) {
				return fmt.Errorf("version %d is already a patch row", v)
			}
			entry, err := jsondelta.Entry(prevRow, v-1, prevState, stored, jsondelta.Bytewise)
			if err != nil {
				return fmt.Errorf("version %d: %w", v, err)
			}
			if !jsondelta.IsSnapshot(entry) {
				update = entry
			}
			prevState, prevRow = stored, entry
		} else {
			if err := replay.Next(stored); err != nil {
				return fmt.Errorf("version %d: %w", v, err)
			}
			if !jsondelta.IsSnapshot(stored) {
				update = replay.State()
			}
		}
		if update == nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE workflow_history SET state = ?3 WHERE instance_id = ?1 AND version = ?2`,
			id, v, string(update)); err != nil {
			return fmt.Errorf("version %d: %w", v, err)
		}
	}
	return nil
}
