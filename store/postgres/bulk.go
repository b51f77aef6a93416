package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
)

// Bulk operations (store.BulkStore).

var _ store.BulkStore = (*Store)(nil)

const (
	bulkColumns = `id, status, version, doc, created_at, updated_at`

	insertBulkSQL = `INSERT INTO bulk_operations (id, status, version, doc, created_at, updated_at)
VALUES ($1, $2, 1, $3::text::jsonb, $4, $4) RETURNING ` + bulkColumns

	// The compare-and-set of every change.
	updateBulkSQL = `UPDATE bulk_operations SET status = $2, version = version + 1, doc = $3::text::jsonb, updated_at = $4
WHERE id = $1 AND version = $5 RETURNING ` + bulkColumns

	bulkVersionSQL = `SELECT version FROM bulk_operations WHERE id = $1`

	listBulkSQL = `SELECT ` + bulkColumns + ` FROM bulk_operations WHERE ($1 = '' OR id = $1) AND ($2 = '' OR status = $2)
ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $3`
	// The partial index of the RUNNING ones.
	listRunningBulkSQL = `SELECT ` + bulkColumns + ` FROM bulk_operations WHERE ($1 = '' OR id = $1) AND status = 'RUNNING'
ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $2`
)

func scanBulk(row pgx.Row) (*store.BulkOperation, error) {
	var (
		op  store.BulkOperation
		doc []byte
	)
	if err := row.Scan(&op.ID, &op.Status, &op.Version, &doc, &op.CreatedAt, &op.UpdatedAt); err != nil {
		return nil, err
	}
	op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	if err := store.DecodeBulk(doc, &op); err != nil {
		return nil, err
	}
	return &op, nil
}

// PutBulk inserts op, or replaces it while its version is expectedVersion.
func (s *Store) PutBulk(ctx context.Context, op *store.BulkOperation, expectedVersion int64) (*store.BulkOperation, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	doc, err := store.EncodeBulk(op)
	if err != nil {
		return nil, err
	}
	now := s.timestamp()
	if expectedVersion == 0 {
		out, err := scanBulk(s.pool.QueryRow(ctx, insertBulkSQL, op.ID, op.Status, string(doc), now))
		if err != nil {
			return nil, commitOutcome(interpretError(err, op.ID))
		}
		return out, nil
	}
	out, err := scanBulk(s.pool.QueryRow(ctx, updateBulkSQL, op.ID, op.Status, string(doc), now, expectedVersion))
	if errors.Is(err, pgx.ErrNoRows) {
		var actual int64
		err := s.pool.QueryRow(ctx, bulkVersionSQL, op.ID).Scan(&actual)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.BulkNotFound(op.ID)
		}
		if err != nil {
			return nil, interpretError(err, "")
		}
		return nil, store.BulkConflict(op.ID, expectedVersion, actual)
	}
	if err != nil {
		return nil, commitOutcome(interpretError(err, op.ID))
	}
	return out, nil
}

// ListBulk returns bulk operations, newest first.
func (s *Store) ListBulk(ctx context.Context, p store.ListBulkParams) ([]*store.BulkOperation, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	var (
		rows pgx.Rows
		err  error
	)
	if p.Status == store.BulkRunning {
		rows, err = s.pool.Query(ctx, listRunningBulkSQL, p.ID, p.Limit)
	} else {
		rows, err = s.pool.Query(ctx, listBulkSQL, p.ID, p.Status, p.Limit)
	}
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	out := []*store.BulkOperation{}
	for rows.Next() {
		op, err := scanBulk(rows)
		if err != nil {
			return nil, interpretError(err, "")
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return out, nil
}

// deleteBulkSQL deletes ended bulk operations written before $1, oldest
// first, at most $2, skipping those another node holds.
const deleteBulkSQL = `DELETE FROM bulk_operations WHERE id = ANY (ARRAY(
	SELECT id FROM bulk_operations WHERE status <> 'RUNNING' AND updated_at < $1 ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

// deleteBulkBefore deletes at most limit bulk operations that ended before
// t (checked by store.PruneParams.Check).
func (s *Store) deleteBulkBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteBulkSQL, t, limit)
	if err != nil {
		return 0, interpretError(err, "")
	}
	return int(tag.RowsAffected()), nil
}
