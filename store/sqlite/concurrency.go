package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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

// slotSQL applies the change ?3 holders, ?4 queued to the row of
// definition ?1's key ?2 (made on the key's first use) as a compare-and-set:
// a change that adds holders applies only while they stay within the limit
// ?5 and, when ?6, while none of the key waits QUEUED; otherwise it changes
// nothing. The counts never go below zero, even for instances a write of a
// former release left uncounted. SQLite's single writer makes it exact.
const slotSQL = `INSERT INTO concurrency_slots (definition, key, holders, queued) VALUES (?1, ?2, max(?3, 0), max(?4, 0))
ON CONFLICT (definition, key) DO UPDATE SET holders = max(holders + ?3, 0), queued = max(queued + ?4, 0)
WHERE ?3 <= 0 OR (holders + ?3 <= ?5 AND (NOT ?6 OR queued = 0))`

// keySlot is an instance's concurrency key as stored: its definition, the
// key and the limit (key NULL for an instance without one).
type keySlot struct {
	definition string
	key        sql.NullString
	limit      sql.NullInt64
}

// applySlot applies ch, the change of instance id of key ks, to the
// key's row, in the caller's write transaction; create says it is new
// (it does not pass the key's QUEUED ones). A refusal by the limit is a
// *store.ConcurrencyLimitError.
func applySlot(ctx context.Context, c dbtx, id string, ks keySlot, ch store.SlotChange, create bool) error {
	if ch.None() || !ks.key.Valid {
		return nil
	}
	res, err := c.ExecContext(ctx, slotSQL, ks.definition, ks.key.String, ch.Holders, ch.Queued, ks.limit.Int64, create)
	if err != nil {
		return interpretError(ctx, err)
	}
	if changed, err := res.RowsAffected(); err != nil || changed > 0 {
		return err
	}
	var queued int64 // why it missed, for the message
	if err := c.QueryRowContext(ctx, `SELECT queued FROM concurrency_slots WHERE definition = ?1 AND key = ?2`, ks.definition, ks.key.String).Scan(&queued); err != nil {
		return interpretError(ctx, err)
	}
	detail := fmt.Sprintf("all %d slots of concurrency key '%s' of definition %s are held", ks.limit.Int64, ks.key.String, ks.definition)
	switch {
	case create && queued > 0:
		detail = fmt.Sprintf("instances of concurrency key '%s' of definition %s wait QUEUED", ks.key.String, ks.definition)
	}
	return &store.ConcurrencyLimitError{ID: id, Detail: detail}
}

// createdSlot is the key of the instance p creates.
func createdSlot(p store.CreateParams) keySlot {
	ks := keySlot{definition: p.Definition}
	if p.Concurrency != nil {
		ks.key = sql.NullString{String: p.Concurrency.Key, Valid: true}
		ks.limit = sql.NullInt64{Int64: int64(p.Concurrency.Limit), Valid: true}
	}
	return ks
}

// currentSlot reads the status and version of instance id and its
// concurrency key, in one look-up.
func currentSlot(ctx context.Context, c dbtx, id string) (workflow.Status, int64, keySlot, error) {
	var (
		status  string
		version int64
		ks      keySlot
	)
	err := c.QueryRowContext(ctx, `SELECT status, version, definition, concurrency_key, concurrency_limit FROM workflow_instances WHERE id = ?1`, id).
		Scan(&status, &version, &ks.definition, &ks.key, &ks.limit)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, ks, store.NotFound(id)
	}
	if err != nil {
		return "", 0, ks, interpretError(ctx, err)
	}
	return workflow.Status(status), version, ks, nil
}

// queuedDueSQL numbers the QUEUED instances of each key oldest first and
// keeps those within the key's free slots (the limit stored with the oldest
// one); ?1 NULL reads every key, else only ?1's key ?2.
var queuedDueSQL = `SELECT ` + instanceColumns + ` FROM (
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
