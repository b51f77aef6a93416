package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/workflow"
)

// History stores, per version, the state whole (a snapshot) or what changed
// since the previous version (a patch row), decided here in Go by
// jsondelta.Row, the policy SQLite follows too; the write statements insert
// the row they are given. The rows are read only when the policy needs them
// (a state of jsondelta.WholeBelow bytes or more), so the engine's writes of
// small states cost no extra round trip. A history row never changes once
// written, so reading the previous one outside the write's transaction is
// safe: a write guarded by version v replaces exactly version v's row.

// historyEntry is what the history row of version of id stores: state is
// the new version's state as marshalState writes it, and patch gives the
// patch from the previous version's (nil: there is none); db is where the
// previous row is read from.
func historyEntry(ctx context.Context, db dbtx, id string, version int64, size int, state func() ([]byte, error), patch func() ([]byte, bool, error)) ([]byte, error) {
	row, err := jsondelta.Row(version, size, state, patch, func() ([]byte, error) {
		return storedHistoryRow(ctx, db, id, version-1)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: workflow %q history version %d: %w", id, version, err)
	}
	return row, nil
}

// storedHistoryRow reads the history row of version of id, compact as
// jsondelta.Row measures it; nil when there is none.
func storedHistoryRow(ctx context.Context, db dbtx, id string, version int64) ([]byte, error) {
	var row []byte
	err := db.QueryRow(ctx, `SELECT state FROM workflow_history WHERE instance_id = $1 AND version = $2`, id, version).Scan(&row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, interpretError(err, id)
	}
	return compactJSON(row), nil
}

// priorState is the state of id at version: prior when the caller has it,
// else read from the instance when the history's policy will need it
// (state, the new version's, not under jsondelta.WholeBelow). Nil when it
// is not needed or id is no longer at version (the write guarded by it
// will not happen).
func priorState(ctx context.Context, db dbtx, id string, version int64, prior *workflow.State, size int) (*workflow.State, error) {
	if prior != nil {
		return prior, nil
	}
	if size < jsondelta.WholeBelow {
		return nil, nil
	}
	var stored []byte
	err := db.QueryRow(ctx, `SELECT `+stateOf("")+` FROM workflow_instances WHERE id = $1 AND version = $2`, id, version).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, interpretError(err, id)
	}
	s, err := decodeState(stored)
	if err != nil {
		return nil, err
	}
	return &s, nil
}
