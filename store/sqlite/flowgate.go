package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/store"
)

// The flow control of a claim (store.FlowGate) on SQLite: the claim reads
// the LEASED counts of its tasks' concurrency keys (task_concurrency) and
// their buckets, decides in Go, and writes them guarded like every store
// does (applyLeased, storeBuckets). The claim holds the database's only
// write lock (see Locks in tasks.go), so what it read cannot change before
// it writes and the guards miss only for rows a write did not keep.

// claimFlowFilter narrows claimSQL to the tasks whose keys have room as
// committed, with plain comparisons: the key's LEASED count below the
// task's limit, the bucket's next token due (?2 is the claim's time in
// microseconds; a bucket without next_token_at is read and decided).
const claimFlowFilter = `
      AND (c.concurrency_key IS NULL OR NOT EXISTS (SELECT 1 FROM task_concurrency AS l
          WHERE l.key = c.concurrency_key AND l.leased >= c.concurrency_limit))
      AND (c.rate_key IS NULL OR NOT EXISTS (SELECT 1 FROM flowd_rate_buckets AS b WHERE b.key = c.rate_key
          AND b.next_token_at > ?2))`

// gateFlowOn checks the locked tasks' keys in c's write transaction and
// returns the tasks that may be leased, the buckets they take tokens from
// and what it held back; see store.FlowGate.
func gateFlowOn(ctx context.Context, c dbtx, locked []store.Claimable, p store.ClaimParams) ([]store.Claimable, []store.BucketTake, store.HeldBack, error) {
	var none store.HeldBack
	keys := store.FlowKeysOf(locked)
	if keys.Empty() {
		return locked, nil, none, nil
	}
	leased := map[string]int{}
	if len(keys.Concurrency) > 0 {
		list, err := json.Marshal(keys.Concurrency)
		if err != nil {
			return nil, nil, none, err
		}
		rows, err := c.QueryContext(ctx, `SELECT key, leased FROM task_concurrency WHERE key IN (SELECT value FROM json_each(?1))`, string(list))
		if err != nil {
			return nil, nil, none, interpretError(ctx, err)
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
			return nil, nil, none, interpretError(ctx, err)
		}
	}
	buckets := map[string]store.RateBucket{}
	if len(keys.Rate) > 0 {
		list, err := json.Marshal(keys.Rate)
		if err != nil {
			return nil, nil, none, err
		}
		rows, err := c.QueryContext(ctx, `SELECT key, tokens, updated_at FROM flowd_rate_buckets WHERE key IN (SELECT value FROM json_each(?1))`, string(list))
		if err != nil {
			return nil, nil, none, interpretError(ctx, err)
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
			return nil, nil, none, interpretError(ctx, err)
		}
	}
	kept, taken, held := store.FlowGate(locked, leased, buckets, store.Timestamp(p.Now))
	return kept, taken, held, nil
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

// storeBuckets writes the buckets a claim took tokens from, each as a
// compare-and-set on the bucket as read (absent: inserted only if still
// absent); a miss is store.ErrRateBucketMoved.
func storeBuckets(ctx context.Context, c dbtx, taken []store.BucketTake) error {
	for _, t := range taken {
		b := t.Bucket
		var (
			res sql.Result
			err error
		)
		if t.Read == nil {
			res, err = c.ExecContext(ctx, `INSERT INTO flowd_rate_buckets (key, tokens, updated_at, next_token_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (key) DO NOTHING`, b.Key, b.Tokens, micros(b.UpdatedAt), micros(b.NextTokenAt))
		} else {
			res, err = c.ExecContext(ctx, `UPDATE flowd_rate_buckets SET tokens = ?2, updated_at = ?3, next_token_at = ?4
WHERE key = ?1 AND tokens = ?5 AND updated_at = ?6`, b.Key, b.Tokens, micros(b.UpdatedAt), micros(b.NextTokenAt), t.Read.Tokens, micros(t.Read.UpdatedAt))
		}
		changed, err := changedRow(ctx, res, err)
		if err != nil {
			return err
		}
		if !changed {
			return fmt.Errorf("rate-limit key %q: %w", b.Key, store.ErrRateBucketMoved)
		}
	}
	return nil
}

// The statements of a change to the LEASED count of key ?1, each a
// compare-and-set: leasedDownSQL takes ?2 leases off while the count stays
// at or above zero; leasedUpSQL adds ?2 (making the row on the key's first
// lease) while it stays within the limit ?3. A miss changes nothing.
const (
	leasedDownSQL = `UPDATE task_concurrency SET leased = leased - ?2 WHERE key = ?1 AND leased - ?2 >= 0`
	leasedUpSQL   = `INSERT INTO task_concurrency (key, leased) SELECT ?1, ?2 WHERE ?2 <= ?3
ON CONFLICT (key) DO UPDATE SET leased = leased + excluded.leased WHERE leased + excluded.leased <= ?3`
)

// applyLeased applies a write's changes to the LEASED counts of its keys
// (store.LeasedChanges) in the caller's write transaction; a change that
// misses its guard is a *store.LeasedCountError.
func applyLeased(ctx context.Context, c dbtx, changes []store.LeasedChange) error {
	for _, ch := range changes {
		var (
			res sql.Result
			err error
		)
		if ch.Delta < 0 {
			res, err = c.ExecContext(ctx, leasedDownSQL, ch.Key, -ch.Delta)
		} else {
			res, err = c.ExecContext(ctx, leasedUpSQL, ch.Key, ch.Delta, ch.Limit)
		}
		changed, err := changedRow(ctx, res, err)
		if err != nil {
			return err
		}
		if !changed {
			return &store.LeasedCountError{Key: ch.Key}
		}
	}
	return nil
}

// changedRow reports whether a guarded statement that ran (err nil)
// changed a row.
func changedRow(ctx context.Context, res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, interpretError(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, interpretError(ctx, err)
	}
	return n > 0, nil
}
