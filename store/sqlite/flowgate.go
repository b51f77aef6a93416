package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/flowd/flowd/store"
)

// The flow-control check of a claim (store.FlowGate) on SQLite: the claim
// holds the database's only write lock (see Locks in tasks.go), so the
// leased counts and the buckets it reads cannot change before it commits,
// and no two claims can both take one slot or one token.

// claimFlowFilter narrows claimSQL to the tasks whose keys have room as
// committed (?2 is the claim's time in microseconds).
const claimFlowFilter = `
      AND (c.concurrency_key IS NULL OR (SELECT count(*) FROM workflow_tasks AS l INDEXED BY workflow_tasks_concurrency_idx
          WHERE l.concurrency_key = c.concurrency_key AND l.status = 'LEASED' AND l.concurrency_key IS NOT NULL) < c.concurrency_limit)
      AND (c.rate_key IS NULL OR NOT EXISTS (SELECT 1 FROM flowd_rate_buckets AS b WHERE b.key = c.rate_key
          AND b.tokens + max(?2 - b.updated_at, 0) / 1e6 * c.rate_per_second < 1))`

// gateFlowOn checks the locked tasks' keys in c's write transaction and
// returns the tasks that may be leased and the buckets they take tokens
// from; see store.FlowGate.
func gateFlowOn(ctx context.Context, c dbtx, locked []store.Claimable, p store.ClaimParams) ([]store.Claimable, []store.RateBucket, error) {
	keys := store.FlowKeysOf(locked)
	if keys.Empty() {
		return locked, nil, nil
	}
	leased := map[string]int{}
	if len(keys.Concurrency) > 0 {
		list, err := json.Marshal(keys.Concurrency)
		if err != nil {
			return nil, nil, err
		}
		rows, err := c.QueryContext(ctx, `SELECT l.concurrency_key, count(*) FROM workflow_tasks AS l INDEXED BY workflow_tasks_concurrency_idx
WHERE l.status = 'LEASED' AND l.concurrency_key IS NOT NULL AND l.concurrency_key IN (SELECT value FROM json_each(?1))
GROUP BY l.concurrency_key`, string(list))
		if err != nil {
			return nil, nil, interpretError(ctx, err)
		}
		err = scanRows(rows, func(rows *sql.Rows) error {
			var (
				key string
				n   int
			)
			err := rows.Scan(&key, &n)
			leased[key] = n
			return err
		})
		if err != nil {
			return nil, nil, interpretError(ctx, err)
		}
	}
	buckets := map[string]store.RateBucket{}
	if len(keys.Rate) > 0 {
		list, err := json.Marshal(keys.Rate)
		if err != nil {
			return nil, nil, err
		}
		rows, err := c.QueryContext(ctx, `SELECT key, tokens, updated_at FROM flowd_rate_buckets WHERE key IN (SELECT value FROM json_each(?1))`, string(list))
		if err != nil {
			return nil, nil, interpretError(ctx, err)
		}
		err = scanRows(rows, func(rows *sql.Rows) error {
			var (
				b  store.RateBucket
				at int64
			)
			err := rows.Scan(&b.Key, &b.Tokens, &at)
			b.UpdatedAt = fromMicros(at)
			buckets[b.Key] = b
			return err
		})
		if err != nil {
			return nil, nil, interpretError(ctx, err)
		}
	}
	kept, taken, held := store.FlowGate(locked, leased, buckets, store.Timestamp(p.Now))
	if p.OnHeldBack != nil && held.Any() {
		p.OnHeldBack(held)
	}
	return kept, taken, nil
}

// scanRows calls scan for every row and closes rows.
func scanRows(rows *sql.Rows, scan func(*sql.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// storeBuckets writes the buckets a claim took tokens from.
func storeBuckets(ctx context.Context, c dbtx, taken []store.RateBucket) error {
	for _, b := range taken {
		if _, err := c.ExecContext(ctx, `INSERT INTO flowd_rate_buckets (key, tokens, updated_at) VALUES (?1, ?2, ?3)
ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`, b.Key, b.Tokens, micros(b.UpdatedAt)); err != nil {
			return interpretError(ctx, err)
		}
	}
	return nil
}
