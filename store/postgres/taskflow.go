package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/flowd/flowd/store"
)

// Flow control of a claim on PostgreSQL (store.FlowGate): the claim reads
// the LEASED counts of its tasks' concurrency keys (task_concurrency) and
// their rate buckets, without a lock, decides in Go which tasks may go,
// and writes its changes guarded by what it read: the leases' change to
// the counts (leasedUpsert: within the limit) and each bucket as a
// compare-and-set on the bucket read (bucketTakeSQL). Each guarded write
// takes the row's lock and, in READ COMMITTED, evaluates its guard on the
// row's latest committed version, so two claims on one key take turns on
// the row and the second one's guard misses if the first took what it
// counted on: nothing is leased beyond a limit and no token is taken twice,
// on every node. A miss raises FD409, which rolls the claim's writes back
// (to a savepoint: see finishClaim); the engine claims again on fresh reads.
const (
	flowLeasedSQL  = `SELECT key, leased FROM task_concurrency WHERE key = ANY ($1::text[])`
	flowBucketsSQL = `SELECT key, tokens, updated_at FROM flowd_rate_buckets WHERE key = ANY ($1::text[])`
)

// The FD409 messages of a flow guard that missed, followed by the key:
// interpretError makes them errors of store.IsFlowMiss.
const (
	leasedMissPrefix = "task concurrency count moved: "
	bucketMissPrefix = "rate bucket moved: "
)

// leasedUpsert is the statement part (two CTEs, fd and fc, the last one
// left open for the caller's chain to close) that applies
// changes to the LEASED counts of keys (store.LeasedChange), the
// parameters keys, deltas and limits (arrays, sorted by key), when cond (a
// WHERE clause) holds. Each is a compare-and-set: a decrease (fd) updates
// the key's row while the count stays at or above zero; an increase (fc)
// makes the row on the key's first lease, else updates it while the count
// stays within the limit. A change that misses its guard returns no row
// (RETURNING c.key); leasedMissed then raises. The limit of a conflicting
// row is a scalar subquery over the parameters, which ON CONFLICT can
// evaluate.
func leasedUpsert(keys, deltas, limits, cond string) string {
	limit := `(SELECT y.lim FROM unnest(` + keys + `::text[], ` + limits + `::int4[]) AS y (key, lim) WHERE y.key = c.key)`
	return `fd AS (
	UPDATE task_concurrency c SET leased = c.leased + x.delta
	FROM unnest(` + keys + `::text[], ` + deltas + `::int4[]) AS x (key, delta)
	` + cond + ` AND x.delta < 0 AND c.key = x.key AND c.leased + x.delta >= 0
	RETURNING c.key
), fc AS (
	INSERT INTO task_concurrency AS c (key, leased)
	SELECT x.key, x.delta FROM unnest(` + keys + `::text[], ` + deltas + `::int4[], ` + limits + `::int4[]) AS x (key, delta, lim)
	` + cond + ` AND x.delta > 0 AND x.delta <= x.lim
	ON CONFLICT (key) DO UPDATE SET leased = c.leased + EXCLUDED.leased
	WHERE c.leased + EXCLUDED.leased <= ` + limit + `
	RETURNING c.key
`
}

// leasedMissed is the expression that raises FD409 for the first key of
// keys that the CTEs of leasedUpsert did not return.
func leasedMissed(keys string) string {
	return `flowd_conflict('` + leasedMissPrefix + `' || (SELECT k FROM unnest(` + keys + `::text[]) AS k
		WHERE k NOT IN (SELECT key FROM fd) AND k NOT IN (SELECT key FROM fc) LIMIT 1))`
}

// leasedShort is the condition under which leasedMissed raises: fewer
// rows changed than keys given.
func leasedShort(keys string) string {
	return `(SELECT count(*) FROM fd) + (SELECT count(*) FROM fc) < cardinality(` + keys + `::text[])`
}

// claimLeasedSQL applies a claim's leases to the counts of their keys
// ($1–$3 as leasedUpsert's), after the claim's leases: the claim leases
// every task it locked and kept or nothing, so the change is the one of
// all of them.
var claimLeasedSQL = `WITH ` + leasedUpsert("$1", "$2", "$3", "WHERE true") + `)
SELECT CASE WHEN ` + leasedShort("$1") + ` THEN ` + leasedMissed("$1") + ` END`

// leasedArgs are a list of changes as the three array parameters of
// leasedUpsert.
func leasedArgs(changes []store.LeasedChange) []any {
	keys, deltas, limits := make([]string, len(changes)), make([]int32, len(changes)), make([]int32, len(changes))
	for i, c := range changes {
		keys[i], deltas[i], limits[i] = c.Key, int32(c.Delta), int32(c.Limit)
	}
	return []any{keys, deltas, limits}
}

// bucketTakeSQL writes the buckets a claim took tokens from, each as a
// compare-and-set on the bucket as read: a bucket read ($5) is updated
// only while its tokens and updated_at are still those read ($6, $7); one
// that was absent is inserted only if it still is. $1–$4 are the buckets
// as written (key, tokens, updated_at, next_token_at). A bucket that
// missed raises FD409.
const bucketTakeSQL = `WITH x AS (
	SELECT * FROM unnest($1::text[], $2::float8[], $3::timestamptz[], $4::timestamptz[], $5::boolean[], $6::float8[], $7::timestamptz[])
		AS x (key, tokens, updated_at, next_token_at, was_read, read_tokens, read_at)
), up AS (
	UPDATE flowd_rate_buckets b SET tokens = x.tokens, updated_at = x.updated_at, next_token_at = x.next_token_at
	FROM x WHERE x.was_read AND b.key = x.key AND b.tokens = x.read_tokens AND b.updated_at = x.read_at
	RETURNING b.key
), ins AS (
	INSERT INTO flowd_rate_buckets (key, tokens, updated_at, next_token_at)
	SELECT key, tokens, updated_at, next_token_at FROM x WHERE NOT x.was_read
	ON CONFLICT (key) DO NOTHING
	RETURNING key
)
SELECT CASE WHEN (SELECT count(*) FROM up) + (SELECT count(*) FROM ins) < cardinality($1::text[])
	THEN flowd_conflict('` + bucketMissPrefix + `' || (SELECT key FROM x
		WHERE key NOT IN (SELECT key FROM up) AND key NOT IN (SELECT key FROM ins) LIMIT 1)) END`

// bucketTakeArgs are the parameters of bucketTakeSQL.
func bucketTakeArgs(taken []store.BucketTake) []any {
	n := len(taken)
	keys, tokens, at, next := make([]string, n), make([]float64, n), make([]time.Time, n), make([]time.Time, n)
	wasRead, readTokens, readAt := make([]bool, n), make([]float64, n), make([]pgtype.Timestamptz, n)
	for i, t := range taken {
		keys[i], tokens[i], at[i], next[i] = t.Bucket.Key, t.Bucket.Tokens, t.Bucket.UpdatedAt, t.Bucket.NextTokenAt
		if t.Read != nil {
			wasRead[i], readTokens[i] = true, t.Read.Tokens
			readAt[i] = pgtype.Timestamptz{Time: t.Read.UpdatedAt, Valid: true}
		}
	}
	return []any{keys, tokens, at, next, wasRead, readTokens, readAt}
}

// flowMiss is the error of an FD409 message of a flow guard, ok false for
// another message.
func flowMiss(msg string) (error, bool) {
	if key, ok := strings.CutPrefix(msg, leasedMissPrefix); ok {
		return &store.LeasedCountError{Key: key}, true
	}
	if key, ok := strings.CutPrefix(msg, bucketMissPrefix); ok {
		return fmt.Errorf("rate-limit key %q: %w", key, store.ErrRateBucketMoved), true
	}
	return nil, false
}

// claimFlow is what a claim's flow control writes once decided — the
// buckets it took tokens from (nil: none) and the leases' change to the
// counts, made from the writes — and what it held back, returned only by
// a claim that committed: a claim left out by a flow guard's miss read
// rows that another claim has moved on since, and the time of the next
// token it would report could be earlier than the one stored, a wake-up
// at which the claim query still finds the bucket empty.
type claimFlow struct {
	taken []store.BucketTake
	held  store.HeldBack
}

// heldBack is what the claim's keys held back (none without keys).
func (f *claimFlow) heldBack() store.HeldBack {
	if f == nil {
		return store.HeldBack{}
	}
	return f.held
}

// statements are the flow statements of a claim that leases leases, sent
// after the leases: the buckets it took tokens from, then the leases'
// change to the keys' counts. Like every write's, a claim's flow rows are
// the last rows it locks (after its tasks), buckets and keys
// each in key order, so that writers of one key never wait on each other
// in a cycle through them.
func (f *claimFlow) statements(leases []store.Claimable) []pgx.QueuedQuery {
	if len(leases) == 0 {
		return nil // nothing leased: no token is used
	}
	var out []pgx.QueuedQuery
	if f != nil && len(f.taken) > 0 {
		out = append(out, pgx.QueuedQuery{SQL: bucketTakeSQL, Arguments: bucketTakeArgs(f.taken)})
	}
	tasks := make([]*store.Task, len(leases))
	for i, c := range leases {
		tasks[i] = c.Task
	}
	if changes := store.LeasedChanges(nil, tasks); len(changes) > 0 {
		out = append(out, pgx.QueuedQuery{SQL: claimLeasedSQL, Arguments: leasedArgs(changes)})
	}
	return out
}

// gateFlow checks the locked tasks' keys on db and returns the tasks that
// may be leased and the claim's flow writes (and what it held back, to
// report once the claim is made); see store.FlowGate. A claim without keys
// reads nothing.
func gateFlow(ctx context.Context, db dbtx, locked []store.Claimable, p store.ClaimParams) ([]store.Claimable, *claimFlow, error) {
	keys := store.FlowKeysOf(locked)
	if keys.Empty() {
		return locked, nil, nil
	}
	b := &pgx.Batch{}
	b.Queue(flowLeasedSQL, keys.Concurrency)
	b.Queue(flowBucketsSQL, keys.Rate)
	br := db.SendBatch(ctx, b)
	leased, buckets, err := readFlow(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = interpretError(cerr, "")
	}
	if err != nil {
		return nil, nil, err
	}
	kept, taken, held := store.FlowGate(locked, leased, buckets, store.Timestamp(p.Now))
	return kept, &claimFlow{taken: taken, held: held}, nil
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
