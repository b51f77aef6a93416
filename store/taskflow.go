package store

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/flowd/flowd/workflow"
)

// NormaliseNewTask gives a new task's flow control the form it is stored
// in — a Priority of 0 becomes workflow.DefaultPriority, so that every
// stored task is found by the claim's priority order — and refuses one the
// claim could not honour (ErrInvalidArgument): a negative attempt timeout,
// flow control out of range, or a task under a concurrency key that is not
// QUEUED (a task of a key is leased by a claim alone, which counts the
// lease).
func NormaliseNewTask(t *Task) error {
	f := &t.Flow
	if f.Priority == 0 {
		f.Priority = workflow.DefaultPriority
	}
	switch {
	case t.AttemptTimeout < 0:
		return fmt.Errorf("%w: task %q: attempt timeout %s is negative", ErrInvalidArgument, t.ID, t.AttemptTimeout)
	case workflow.PriorityProblem(f.Priority) != "":
		return fmt.Errorf("%w: task %q: priority %s", ErrInvalidArgument, t.ID, workflow.PriorityProblem(f.Priority))
	case f.ConcurrencyLimit < 0 || f.ConcurrencyLimit > math.MaxInt32:
		return fmt.Errorf("%w: task %q: concurrency limit %d is out of range", ErrInvalidArgument, t.ID, f.ConcurrencyLimit)
	case f.ConcurrencyLimit == 0 && f.ConcurrencyKey != "":
		return fmt.Errorf("%w: task %q: a concurrency key without a limit", ErrInvalidArgument, t.ID)
	case f.ConcurrencyLimit > 0 && t.Status != TaskQueued:
		// Only a claim leases a task under a key: its lease is counted.
		return fmt.Errorf("%w: task %q: a new task under a concurrency key must be QUEUED, not %s", ErrInvalidArgument, t.ID, t.Status)
	case math.IsNaN(f.RatePerSecond) || f.RatePerSecond < 0 || f.RatePerSecond > workflow.MaxRatePerSecond:
		return fmt.Errorf("%w: task %q: rate %g is out of range", ErrInvalidArgument, t.ID, f.RatePerSecond)
	case f.RatePerSecond > 0 && (f.RateBurst < 1 || f.RateBurst > workflow.MaxRateBurst):
		return fmt.Errorf("%w: task %q: rate burst %d is out of range", ErrInvalidArgument, t.ID, f.RateBurst)
	case f.RatePerSecond == 0 && (f.RateKey != "" || f.RateBurst != 0):
		return fmt.Errorf("%w: task %q: a rate key or burst without a rate", ErrInvalidArgument, t.ID)
	}
	return nil
}

// FlowKeys are the keys of the claimable tasks a claim has to check:
// concurrency keys and rate-limit keys, each once, sorted.
type FlowKeys struct {
	Concurrency []string
	Rate        []string
}

// Empty reports whether no task of the claim is under flow control.
func (k FlowKeys) Empty() bool { return len(k.Concurrency) == 0 && len(k.Rate) == 0 }

// FlowKeysOf returns the keys of the locked tasks.
func FlowKeysOf(locked []Claimable) FlowKeys {
	var k FlowKeys
	for _, c := range locked {
		f := c.Task.Flow
		if f.ConcurrencyLimit > 0 && !slices.Contains(k.Concurrency, f.ConcurrencyKey) {
			k.Concurrency = append(k.Concurrency, f.ConcurrencyKey)
		}
		if f.RatePerSecond > 0 && !slices.Contains(k.Rate, f.RateKey) {
			k.Rate = append(k.Rate, f.RateKey)
		}
	}
	slices.Sort(k.Concurrency)
	slices.Sort(k.Rate)
	return k
}

// ErrRateBucketMoved: a claim's write of a rate-limit bucket found the
// stored bucket no longer the one the claim read (another claim took
// tokens first): nothing of the claim was made. It errors.Is ErrFlowMiss.
var ErrRateBucketMoved = fmt.Errorf("%w: a rate-limit bucket moved", ErrFlowMiss)

// RateBucket is a rate-limit key's token bucket as stored: Tokens at
// UpdatedAt, refilled since at the rate of the task that takes one.
// NextTokenAt is when it holds a token again (UpdatedAt when it holds one
// now; zero when not known, for a bucket a former release wrote): the
// claim query leaves out the tasks of a bucket whose NextTokenAt is still
// ahead, with a plain comparison.
type RateBucket struct {
	Key         string
	Tokens      float64
	UpdatedAt   time.Time
	NextTokenAt time.Time
}

// BucketTake is a claim's write of a bucket it took tokens from: Bucket
// as written, guarded by Read, the bucket as the claim read it (nil: there
// was none, and the write inserts it only if there still is none). A
// store writes it as a compare-and-set — the stored tokens and UpdatedAt
// still those read — and a miss fails the claim (ErrRateBucketMoved).
type BucketTake struct {
	Bucket RateBucket
	Read   *RateBucket
}

// HeldBack says what a claim's keys held back, for the engine's metrics
// and its next look: Concurrency tasks found their key at its limit, Rate
// tasks found no token in their bucket, and RateEmptied buckets were
// emptied by this claim (the next tasks of those keys wait: the claim
// query leaves them out until a token is due). RateRetryAt (zero: none)
// is when the first of those buckets has a token again.
type HeldBack struct {
	Concurrency int
	Rate        int
	RateEmptied int
	RateRetryAt time.Time
}

// Any reports whether anything was held back.
func (h HeldBack) Any() bool { return h.Concurrency > 0 || h.Rate > 0 || h.RateEmptied > 0 }

// nextToken is when bucket b, refilled at rate, has a token: now, when it
// has one, else b.UpdatedAt plus the time (1 - tokens) takes.
func nextToken(b RateBucket, rate float64) time.Time {
	if b.Tokens >= 1 {
		return b.UpdatedAt
	}
	return b.UpdatedAt.Add(time.Duration(math.Ceil((1 - b.Tokens) / rate * float64(time.Second))))
}

// retryAt notes that bucket b, refilled at rate, has its next token at
// nextToken.
func (h *HeldBack) retryAt(b RateBucket, rate float64) {
	if at := nextToken(b, rate); h.RateRetryAt.IsZero() || at.Before(h.RateRetryAt) {
		h.RateRetryAt = at
	}
}

// FlowGate is a claim's check of its tasks' keys, made on what the claim
// read of them, without a lock: leased holds the LEASED counts of the
// concurrency keys (their rows; absent: none leased) and buckets the
// stored buckets of the rate keys (absent: full). It keeps the tasks, in
// the order locked, that fit — fewer than their limit leased, counting
// those kept before them, and a token in their bucket — and returns the
// buckets to store, one token taken per task kept, each guarded by the
// bucket as read. Every other task stays QUEUED: the claim does not write
// it. Exactness across claims comes from the writes' guards: the leases'
// change to the counts (LeasedChanges) and the buckets' compare-and-set
// miss when another claim got there first, and the claim is then made
// again on fresh reads. A kept task that the claim's decision then does
// not lease has used its token for nothing, never more than allowed.
func FlowGate(locked []Claimable, leased map[string]int, buckets map[string]RateBucket, now time.Time) (kept []Claimable, taken []BucketTake, held HeldBack) {
	kept = make([]Claimable, 0, len(locked))
	read := make(map[string]RateBucket, len(buckets))
	maps.Copy(read, buckets)
	touched := map[string]float64{} // the rates of the buckets taken from
	for _, c := range locked {
		f := c.Task.Flow
		if f.ConcurrencyLimit > 0 && leased[f.ConcurrencyKey] >= f.ConcurrencyLimit {
			held.Concurrency++
			continue
		}
		if f.RatePerSecond > 0 {
			b, ok := buckets[f.RateKey]
			if !ok {
				b = RateBucket{Key: f.RateKey, Tokens: float64(f.RateBurst), UpdatedAt: now}
			}
			if elapsed := now.Sub(b.UpdatedAt); elapsed > 0 {
				b.Tokens = math.Min(float64(f.RateBurst), b.Tokens+elapsed.Seconds()*f.RatePerSecond)
				b.UpdatedAt = now
			}
			if b.Tokens < 1 {
				held.Rate++
				held.retryAt(b, f.RatePerSecond)
				buckets[f.RateKey] = b
				continue
			}
			b.Tokens--
			buckets[f.RateKey] = b
			touched[f.RateKey] = f.RatePerSecond
		}
		if f.ConcurrencyLimit > 0 {
			leased[f.ConcurrencyKey]++
		}
		kept = append(kept, c)
	}
	for _, key := range slices.Sorted(maps.Keys(touched)) {
		b := buckets[key]
		b.NextTokenAt = nextToken(b, touched[key])
		take := BucketTake{Bucket: b}
		if r, ok := read[key]; ok {
			take.Read = &r
		}
		taken = append(taken, take)
		if b.Tokens < 1 {
			held.RateEmptied++
			held.retryAt(b, touched[key])
		}
	}
	return kept, taken, held
}
