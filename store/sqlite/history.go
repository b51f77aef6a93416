package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// History stores, per version, the state whole (a snapshot) or what changed
// since the previous version (a patch row); internal/jsondelta has the
// format and the snapshot policy. Every write of a version hands
// appendHistory the state it writes and the patch from the one it
// replaces (store.HistoryPatch, from the caller's Prior, else from the
// state read inside its write transaction by storedState).

// storedState returns the state of id as stored now (assembled from its
// header and its steps' records), before a write of a new version; nil
// when there is no such instance (the write will say so).
func storedState(ctx context.Context, c dbtx, id string) ([]byte, error) {
	var state string
	err := c.QueryRowContext(ctx, `SELECT `+stateOf("")+` FROM workflow_instances WHERE id = ?1`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	return []byte(state), nil
}

// appendHistory writes the history row of version of id, whose state is
// state, with its status, time, cause and actor; patch gives the patch
// from the state that version replaced (nil: id's first version).
func appendHistory(ctx context.Context, c dbtx, id string, version int64, status workflow.Status, size int, state func() ([]byte, error), at int64, cause, actor string, patch func() ([]byte, bool, error)) error {
	row, err := historyEntry(ctx, c, id, version, size, state, patch)
	if err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx,
		`INSERT INTO workflow_history (instance_id, version, status, state, at, cause, actor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`,
		id, version, string(status), string(row), at, cause, actor); err != nil {
		return interpretError(ctx, err)
	}
	return nil
}

// historyEntry is what the history row of version of id stores: see
// jsondelta.Row, which reads the previous version's row only when the
// policy needs it.
func historyEntry(ctx context.Context, c dbtx, id string, version int64, size int, state func() ([]byte, error), patch func() ([]byte, bool, error)) ([]byte, error) {
	row, err := jsondelta.Row(version, size, state, patch, func() ([]byte, error) {
		var prevRow string
		err := c.QueryRowContext(ctx, `SELECT state FROM workflow_history WHERE instance_id = ?1 AND version = ?2`, id, version-1).Scan(&prevRow)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		return []byte(prevRow), nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: workflow %q history version %d: %w", id, version, err)
	}
	return row, nil
}

// historySQL reads from the snapshot that version ?2's row starts from (a
// patch row's first element; a snapshot is its own) up to ?2 + ?3 (?3
// negative: no limit).
const historySQL = `SELECT version, status, state, at, cause, actor FROM workflow_history
WHERE instance_id = ?1
	AND version >= coalesce((SELECT CASE WHEN json_type(state) = 'array' THEN json_extract(state, '$[0]') ELSE version END
		FROM workflow_history WHERE instance_id = ?1 AND version = ?2), ?2)
	AND (?3 < 0 OR version < ?2 + ?3)
ORDER BY version`

// History returns the versions of the instance from since on, oldest first,
// rebuilt from the snapshot before since. An existing instance always has
// its version 0 row, so no rows means no instance.
func (q *querier) History(ctx context.Context, id string, since int64, limit int) ([]store.HistoryEntry, error) {
	if err := store.CheckHistoryRange(since, limit); err != nil {
		return nil, err
	}
	lim := int64(limit)
	if limit == 0 {
		lim = -1
	}
	rows, err := q.read.QueryContext(ctx, historySQL, id, since, lim)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	entries := []store.HistoryEntry{}
	replay := jsondelta.NewReplay(jsondelta.Bytewise)
	for rows.Next() {
		var (
			e      store.HistoryEntry
			status string
			row    string
			at     int64
		)
		if err := rows.Scan(&e.Version, &status, &row, &at, &e.Cause, &e.Actor); err != nil {
			return nil, interpretError(ctx, err)
		}
		if err := replay.Next([]byte(row)); err != nil {
			return nil, fmt.Errorf("sqlite: workflow %q history version %d: %w", id, e.Version, err)
		}
		if e.Version < since {
			continue // on the way from the snapshot
		}
		e.Status = workflow.Status(status)
		if err := e.State.UnmarshalJSON(replay.State()); err != nil {
			return nil, fmt.Errorf("sqlite: workflow %q history version %d: stored state: %w", id, e.Version, err)
		}
		e.At = fromMicros(at)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	if len(entries) == 0 {
		// An instance has every version from 0 on: since is beyond its
		// current version, or there is no such instance.
		var exists bool
		if err := q.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_instances WHERE id = ?1)`, id).Scan(&exists); err != nil {
			return nil, interpretError(ctx, err)
		}
		if !exists {
			return nil, store.NotFound(id)
		}
	}
	return entries, nil
}

// HistorySize measures the history of id; see store.HistorySizer.
func (s *Store) HistorySize(ctx context.Context, id string) (store.HistorySize, error) {
	var hs store.HistorySize
	var stateBytes sql.NullInt64
	err := s.readDB.QueryRowContext(ctx, `SELECT (SELECT length(CAST(`+stateOf("")+` AS BLOB)) FROM workflow_instances WHERE id = ?1),
		count(*), coalesce(sum(json_type(state) = 'object'), 0),
		coalesce(sum(length(CAST(state AS BLOB)) + length(CAST(status AS BLOB)) + length(CAST(cause AS BLOB))), 0)
	FROM workflow_history WHERE instance_id = ?1`, id).Scan(&stateBytes, &hs.Versions, &hs.Snapshots, &hs.Bytes)
	if err != nil {
		return store.HistorySize{}, interpretError(ctx, err)
	}
	if !stateBytes.Valid {
		return store.HistorySize{}, store.NotFound(id)
	}
	hs.StateBytes = stateBytes.Int64
	return hs, nil
}

var _ store.HistorySizer = (*Store)(nil)
