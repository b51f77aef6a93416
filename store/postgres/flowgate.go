package postgres

import (
	"context"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
)

// The flow-control check of a claim (store.FlowGate) on PostgreSQL. The
// claim query has locked its tasks; for those under a concurrency key or
// a rate limit, one pipeline takes a transaction-scoped advisory lock per
// key, in ascending lock-id order (two claims never wait on each other in
// a cycle), and then reads the leased counts and the buckets. They are
// separate statements so that the reads, in READ COMMITTED, see every
// claim that held a lock before this one: each statement takes its
// snapshot when it starts, after the locks are granted. Every lease of a
// task with a key is made under that key's lock, so no two claims can
// both see a free slot or a token that only one of them may take.
//
// A group's claim (store.GroupClaim) holds the locks of its group's writes
// and must wait for nobody: it takes the keys' locks only if they are free
// (flowTryLockSQL) and leaves the tasks of a busy key QUEUED, for the claim
// that holds it or a later one.
const (
	flowLockSQL    = `SELECT pg_advisory_xact_lock(x) FROM (SELECT x FROM unnest($1::bigint[]) AS x ORDER BY x) AS s`
	flowTryLockSQL = `SELECT x FROM unnest($1::bigint[]) AS x WHERE NOT pg_try_advisory_xact_lock(x)`
	flowLeasedSQL  = `SELECT concurrency_key, count(*) FROM workflow_tasks
WHERE status = 'LEASED' AND concurrency_key = ANY ($1::text[]) GROUP BY concurrency_key`
	flowBucketsSQL = `SELECT key, tokens, updated_at FROM flowd_rate_buckets WHERE key = ANY ($1::text[])`
	// flowTakeSQL stores the buckets a claim took tokens from.
	flowTakeSQL = `INSERT INTO flowd_rate_buckets (key, tokens, updated_at)
SELECT * FROM unnest($1::text[], $2::float8[], $3::timestamptz[])
ON CONFLICT (key) DO UPDATE SET tokens = EXCLUDED.tokens, updated_at = EXCLUDED.updated_at`
)

// flowLockID is the advisory lock of a key; the prefix keeps concurrency
// and rate keys apart. Two keys with one id only share a lock.
func flowLockID(kind, key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// gateFlow checks the locked tasks' keys in db's transaction and returns
// the tasks that may be leased and the statement that stores the buckets
// they take tokens from (nil when none); see store.FlowGate. wait says
// whether it waits for the keys' locks (a group's claim does not).
func gateFlow(ctx context.Context, db dbtx, locked []store.Claimable, p store.ClaimParams, wait bool) ([]store.Claimable, *pgx.QueuedQuery, error) {
	keys := store.FlowKeysOf(locked)
	if keys.Empty() {
		return locked, nil, nil
	}
	ids := make([]int64, 0, len(keys.Concurrency)+len(keys.Rate))
	for _, k := range keys.Concurrency {
		ids = append(ids, flowLockID("concurrency", k))
	}
	for _, k := range keys.Rate {
		ids = append(ids, flowLockID("rate", k))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	b := &pgx.Batch{}
	if wait {
		b.Queue(flowLockSQL, ids)
	} else {
		b.Queue(flowTryLockSQL, ids)
	}
	b.Queue(flowLeasedSQL, keys.Concurrency)
	b.Queue(flowBucketsSQL, keys.Rate)
	br := db.SendBatch(ctx, b)
	busy, err := readBusy(br, wait)
	var (
		leased  map[string]int
		buckets map[string]store.RateBucket
	)
	if err == nil {
		leased, buckets, err = readFlow(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = interpretError(cerr, "")
	}
	if err != nil {
		return nil, nil, err
	}
	var held store.HeldBack
	if len(busy) > 0 {
		free := locked[:0:0]
		for _, c := range locked {
			f := c.Task.Flow
			if f.ConcurrencyLimit > 0 && busy[flowLockID("concurrency", f.ConcurrencyKey)] ||
				f.RatePerSecond > 0 && busy[flowLockID("rate", f.RateKey)] {
				held.Concurrency++ // its key is being decided by another claim
				continue
			}
			free = append(free, c)
		}
		locked = free
	}
	now := store.Timestamp(p.Now)
	kept, taken, gated := store.FlowGate(locked, leased, buckets, now)
	held.Concurrency += gated.Concurrency
	held.Rate, held.RateEmptied, held.RateRetryAt = gated.Rate, gated.RateEmptied, gated.RateRetryAt
	if p.OnHeldBack != nil && held.Any() {
		p.OnHeldBack(held)
	}
	if len(taken) == 0 {
		return kept, nil, nil
	}
	n := len(taken)
	bk, tokens, at := make([]string, n), make([]float64, n), make([]time.Time, n)
	for i, t := range taken {
		bk[i], tokens[i], at[i] = t.Key, t.Tokens, t.UpdatedAt
	}
	return kept, &pgx.QueuedQuery{SQL: flowTakeSQL, Arguments: []any{bk, tokens, at}}, nil
}

// readBusy reads the result of the lock statement of gateFlow's
// pipeline: the lock ids another transaction holds (none when it waited
// for them).
func readBusy(br pgx.BatchResults, waited bool) (map[int64]bool, error) {
	if waited {
		if _, err := br.Exec(); err != nil {
			return nil, interpretError(err, "")
		}
		return nil, nil
	}
	rows, err := br.Query()
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	busy := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, interpretError(err, "")
		}
		busy[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return busy, nil
}

// readFlow reads the counts and buckets of gateFlow's pipeline.
func readFlow(br pgx.BatchResults) (map[string]int, map[string]store.RateBucket, error) {
	leased := map[string]int{}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, interpretError(err, "")
	}
	for rows.Next() {
		var (
			key string
			n   int64
		)
		if err := rows.Scan(&key, &n); err != nil {
			rows.Close()
			return nil, nil, interpretError(err, "")
		}
		leased[key] = int(n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, interpretError(err, "")
	}
	buckets := map[string]store.RateBucket{}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, interpretError(err, "")
	}
	defer rows.Close()
	for rows.Next() {
		var b store.RateBucket
		if err := rows.Scan(&b.Key, &b.Tokens, &b.UpdatedAt); err != nil {
			return nil, nil, interpretError(err, "")
		}
		b.UpdatedAt = b.UpdatedAt.UTC()
		buckets[b.Key] = b
	}
	if err := rows.Err(); err != nil {
		return nil, nil, interpretError(err, "")
	}
	return leased, buckets, nil
}
