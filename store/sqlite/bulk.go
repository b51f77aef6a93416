package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/flowd/flowd/store"
)

// Bulk operations (store.BulkStore).

var _ store.BulkStore = (*Store)(nil)

const bulkColumns = `id, status, version, doc, created_at, updated_at`

func scanBulk(row rowScanner) (*store.BulkOperation, error) {
	var (
		op           store.BulkOperation
		doc          string
		created, upd int64
	)
	if err := row.Scan(&op.ID, &op.Status, &op.Version, &doc, &created, &upd); err != nil {
		return nil, err
	}
	op.CreatedAt, op.UpdatedAt = fromMicros(created), fromMicros(upd)
	if err := store.DecodeBulk([]byte(doc), &op); err != nil {
		return nil, err
	}
	return &op, nil
}

// PutBulk inserts op, or replaces it while its version is expectedVersion.
func (q *querier) PutBulk(ctx context.Context, op *store.BulkOperation, expectedVersion int64) (*store.BulkOperation, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	doc, err := store.EncodeBulk(op)
	if err != nil {
		return nil, err
	}
	now := q.timestamp()
	var out *store.BulkOperation
	err = q.write(ctx, func(c dbtx) error {
		if expectedVersion == 0 {
			_, err := c.ExecContext(ctx, `INSERT INTO bulk_operations (id, status, version, doc, created_at, updated_at)
				VALUES (?1, ?2, 1, ?3, ?4, ?4)`, op.ID, op.Status, string(doc), now)
			if err != nil {
				return interpretError(ctx, err)
			}
		} else {
			res, err := c.ExecContext(ctx, `UPDATE bulk_operations SET status = ?2, version = version + 1, doc = ?3, updated_at = ?4
				WHERE id = ?1 AND version = ?5`, op.ID, op.Status, string(doc), now, expectedVersion)
			if err != nil {
				return interpretError(ctx, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				if err != nil {
					return interpretError(ctx, err)
				}
				return bulkMiss(ctx, c, op.ID, expectedVersion)
			}
		}
		var err error
		out, err = scanBulk(c.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_operations WHERE id = ?1`, op.ID))
		return interpretError(ctx, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bulkMiss says why a compare-and-set of bulk operation id wrote nothing.
func bulkMiss(ctx context.Context, c dbtx, id string, expected int64) error {
	var actual int64
	err := c.QueryRowContext(ctx, `SELECT version FROM bulk_operations WHERE id = ?1`, id).Scan(&actual)
	if errors.Is(err, sql.ErrNoRows) {
		return store.BulkNotFound(id)
	}
	if err != nil {
		return interpretError(ctx, err)
	}
	return store.BulkConflict(id, expected, actual)
}

// ListBulk returns bulk operations, newest first.
func (q *querier) ListBulk(ctx context.Context, p store.ListBulkParams) ([]*store.BulkOperation, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	query := `SELECT ` + bulkColumns + ` FROM bulk_operations WHERE (?1 = '' OR id = ?1) AND (?2 = '' OR status = ?2)
		ORDER BY created_at DESC, id DESC LIMIT ?3`
	if p.Status == store.BulkRunning {
		// The partial index of the RUNNING ones.
		query = `SELECT ` + bulkColumns + ` FROM bulk_operations WHERE (?1 = '' OR id = ?1) AND status = 'RUNNING'
		ORDER BY created_at DESC, id DESC LIMIT ?3`
	}
	rows, err := q.read.QueryContext(ctx, query, p.ID, p.Status, p.Limit)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	out := []*store.BulkOperation{}
	for rows.Next() {
		op, err := scanBulk(rows)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return out, nil
}

// deleteBulkBefore deletes at most limit bulk operations that ended before
// t (checked by store.PruneParams.Check).
func (q *querier) deleteBulkBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int64
	err := q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx, `DELETE FROM bulk_operations WHERE id IN (
			SELECT id FROM bulk_operations WHERE status <> 'RUNNING' AND updated_at < ?1 ORDER BY updated_at LIMIT ?2)`, micros(t), limit)
		if err != nil {
			return interpretError(ctx, err)
		}
		n, err = res.RowsAffected()
		return interpretError(ctx, err)
	})
	return int(n), err
}
