package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/flowd/flowd/store"
)

// checkIdempotencyKey refuses a create whose key was recorded less than
// store.IdempotencyKeyTTL before now (unix microseconds), with an
// *store.IdempotencyKeyError. It runs in the create's write transaction:
// SQLite's single writer makes the check and the insert that follows one
// step, so of concurrent creates with one key exactly one creates.
func checkIdempotencyKey(ctx context.Context, c dbtx, p store.CreateParams, now int64) error {
	var owner, hash string
	var at int64
	err := c.QueryRowContext(ctx, `SELECT workflow_id, request_hash, created_at FROM idempotency_keys WHERE key = ?1`,
		p.IdempotencyKey).Scan(&owner, &hash, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return interpretError(ctx, err)
	case at < now-store.IdempotencyKeyTTL.Microseconds():
		return nil // expired: recordIdempotencyKey replaces it
	}
	return &store.IdempotencyKeyError{Key: p.IdempotencyKey, WorkflowID: owner, SameRequest: hash == p.RequestHash}
}

// recordIdempotencyKey stores p's key for its new instance, replacing an
// expired row of the same key.
func recordIdempotencyKey(ctx context.Context, c dbtx, p store.CreateParams, now int64) error {
	_, err := c.ExecContext(ctx, `INSERT INTO idempotency_keys (key, request_hash, workflow_id, created_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (key) DO UPDATE SET request_hash = excluded.request_hash, workflow_id = excluded.workflow_id, created_at = excluded.created_at`,
		p.IdempotencyKey, p.RequestHash, p.ID, now)
	return interpretError(ctx, err)
}

// deleteKeysBefore deletes at most limit keys created before t, oldest
// first (checked by store.PruneParams.Check).
func (q *querier) deleteKeysBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int64
	err := q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE key IN (
			SELECT key FROM idempotency_keys WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)`, micros(t), limit)
		if err != nil {
			return interpretError(ctx, err)
		}
		n, err = res.RowsAffected()
		return interpretError(ctx, err)
	})
	return int(n), err
}
