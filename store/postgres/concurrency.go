package postgres

import (
	"context"
	"fmt"

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

// slotUpsert is the statement part that applies a write's slot change
// (store.SlotChange) to the row of counts of its key: the row is made on
// the key's first use, else updated — a compare-and-set whose guard is
// that a change that adds holders keeps them within the limit (and, with
// noQueue, that none of the key waits QUEUED). When the guard misses it
// updates nothing and returns no row; the caller's statement then raises.
// The row lock taken by ON CONFLICT DO UPDATE (held until the transaction
// ends, the guard evaluated on the row's latest version) makes writers of
// one key take turns on every node. definition and key are the row's
// columns as SQL expressions over source (a FROM clause, with its WHERE);
// holders, queued and limit are SQL expressions that ON CONFLICT can
// evaluate: parameters and scalar subqueries, no column of source.
func slotUpsert(definition, key, source, holders, queued, limit string, noQueue bool) string {
	guard := `c.holders + ` + holders + ` <= ` + limit
	if noQueue {
		guard += ` AND c.queued = 0`
	}
	// The counts are never below zero, even for instances a write of a
	// former release left uncounted.
	return `INSERT INTO concurrency_slots AS c (definition, key, holders, queued)
	SELECT ` + definition + `, ` + key + `, greatest(` + holders + `, 0), greatest(` + queued + `, 0) ` + source + `
	ON CONFLICT (definition, key) DO UPDATE SET holders = greatest(c.holders + ` + holders + `, 0), queued = greatest(c.queued + ` + queued + `, 0)
	WHERE ` + holders + ` <= 0 OR (` + guard + `)
	RETURNING 1`
}

// slotMissPrefix starts the FD409 message of a write refused by its key's
// limit (raised with flowd_conflict, which rolls the statement back):
// interpretError makes it a *store.ConcurrencyLimitError.
const slotMissPrefix = "concurrency limit: "

// slotArgs are a change's two parameters.
func slotArgs(ch store.SlotChange) []any { return []any{int32(ch.Holders), int32(ch.Queued)} }

// param is the placeholder of parameter n.
func param(n int) string { return fmt.Sprintf("$%d", n) }

// queuedDueSQL numbers the QUEUED instances of each key oldest first and
// keeps those within the key's free slots (the limit stored with the oldest
// one, as each row of a key carries the limit it was started with); $1 NULL
// reads every key, else only $1's key $2.
var queuedDueSQL = `SELECT ` + instanceColumns + ` FROM (
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
var oldestHolderSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
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
