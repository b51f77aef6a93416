package postgres

import (
	"context"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// concurrencyArgs are the create statement's last two parameters: the
// instance's concurrency key and limit, NULL for an instance without one.
func concurrencyArgs(s *store.ConcurrencySlot) []any {
	if s == nil {
		return []any{nil, nil}
	}
	return []any{s.Key, int32(s.Limit)}
}

// queuedDueSQL numbers the QUEUED instances of each key oldest first and
// keeps those within the key's free slots (the limit stored with the oldest
// one, as each row of a key carries the limit it was started with); $1 NULL
// reads every key, else only $1's key $2.
const queuedDueSQL = `SELECT ` + instanceColumns + ` FROM (
	SELECT i.*, row_number() OVER (PARTITION BY definition, concurrency_key ORDER BY created_at, id) AS n,
		first_value(concurrency_limit) OVER (PARTITION BY definition, concurrency_key ORDER BY created_at, id) AS lim
	FROM workflow_instances i
	WHERE status = 'QUEUED' AND concurrency_key IS NOT NULL
	  AND ($1::text IS NULL OR (definition = $1 AND concurrency_key = $2::text))
) q
WHERE q.n <= q.lim - (SELECT count(*) FROM workflow_instances h
	WHERE h.definition = q.definition AND h.concurrency_key = q.concurrency_key AND h.status IN ('RUNNING', 'PAUSED'))
ORDER BY created_at, id
LIMIT $3`

// queuedDue returns the QUEUED instances that have a free slot (checked p
// of store.DueQueued).
func (q *querier) queuedDue(ctx context.Context, p store.DueParams) ([]*workflow.Instance, error) {
	var def, key any
	if p.Definition != "" {
		if !storableText(p.Definition) || !storableText(p.Key) {
			return []*workflow.Instance{}, nil
		}
		def, key = p.Definition, p.Key
	}
	rows, err := q.db.Query(ctx, queuedDueSQL, def, key, p.Limit)
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	out := []*workflow.Instance{}
	for rows.Next() {
		inst, err := scanInstance(rows)
		if err != nil {
			return nil, interpretError(err, "")
		}
		out = append(out, inst)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return out, nil
}

// oldestHolderSQL is the oldest RUNNING instance of a key.
const oldestHolderSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
WHERE definition = $1 AND concurrency_key = $2 AND status = 'RUNNING'
ORDER BY created_at, id LIMIT 1`

// oldestHolder returns the oldest RUNNING instance of the key, or
// ErrNotFound.
func (q *querier) oldestHolder(ctx context.Context, definition, key string) (*workflow.Instance, error) {
	if !storableText(definition) || !storableText(key) {
		return nil, store.NotFound("")
	}
	inst, err := scanInstance(q.db.QueryRow(ctx, oldestHolderSQL, definition, key))
	if err != nil {
		return nil, interpretError(err, "")
	}
	return inst, nil
}
