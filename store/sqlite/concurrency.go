package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// concurrencyArgs are the instance's concurrency key and limit, NULL for
// an instance without one.
func concurrencyArgs(s *store.ConcurrencySlot) []any {
	if s == nil {
		return []any{nil, nil}
	}
	return []any{s.Key, s.Limit}
}

// queuedDueSQL numbers the QUEUED instances of each key oldest first and
// keeps those within the key's free slots (the limit stored with the oldest
// one); ?1 NULL reads every key, else only ?1's key ?2.
const queuedDueSQL = `SELECT ` + instanceColumns + ` FROM (
	SELECT i.*, row_number() OVER (PARTITION BY definition, concurrency_key ORDER BY created_at, id) AS n,
		first_value(concurrency_limit) OVER (PARTITION BY definition, concurrency_key ORDER BY created_at, id) AS lim
	FROM workflow_instances i
	WHERE status = 'QUEUED' AND concurrency_key IS NOT NULL
	  AND (?1 IS NULL OR (definition = ?1 AND concurrency_key = ?2))
) q
WHERE q.n <= q.lim - (SELECT count(*) FROM workflow_instances h
	WHERE h.definition = q.definition AND h.concurrency_key = q.concurrency_key AND h.status IN ('RUNNING', 'PAUSED'))
ORDER BY created_at, id
LIMIT ?3`

// queuedDue returns the QUEUED instances that have a free slot (checked p
// of store.DueQueued).
func (q *querier) queuedDue(ctx context.Context, p store.DueParams) ([]*workflow.Instance, error) {
	var def, key any
	if p.Definition != "" {
		def, key = p.Definition, p.Key
	}
	rows, err := q.read.QueryContext(ctx, queuedDueSQL, def, key, p.Limit)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	out := []*workflow.Instance{}
	for rows.Next() {
		inst, err := scanInstance(rows)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		out = append(out, inst)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return out, nil
}

// oldestHolder returns the oldest RUNNING instance of the key, or
// ErrNotFound.
func (q *querier) oldestHolder(ctx context.Context, definition, key string) (*workflow.Instance, error) {
	inst, err := scanInstance(q.read.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM workflow_instances
WHERE definition = ?1 AND concurrency_key = ?2 AND status = 'RUNNING'
ORDER BY created_at, id LIMIT 1`, definition, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.NotFound("")
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	return inst, nil
}
