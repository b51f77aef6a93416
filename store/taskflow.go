package store

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/flowd/flowd/workflow"
)

// NormaliseTaskFlow gives a new task's flow control the form it is stored
// in — a Priority of 0 becomes workflow.DefaultPriority, so that every
// stored task is found by the claim's priority order — and refuses one the
// claim could not honour (ErrInvalidArgument).
func NormaliseTaskFlow(t *Task) error {
	f := &t.Flow
	if f.Priority == 0 {
		f.Priority = workflow.DefaultPriority
	}
	switch {
	case workflow.PriorityProblem(f.Priority) != "":
		return fmt.Errorf("%w: task %q: priority %s", ErrInvalidArgument, t.ID, workflow.PriorityProblem(f.Priority))
	case f.ConcurrencyLimit < 0 || f.ConcurrencyLimit > math.MaxInt32:
		return fmt.Errorf("%w: task %q: concurrency limit %d is out of range", ErrInvalidArgument, t.ID, f.ConcurrencyLimit)
	case f.ConcurrencyLimit == 0 && f.ConcurrencyKey != "":
		return fmt.Errorf("%w: task %q: a concurrency key without a limit", ErrInvalidArgument, t.ID)
	case math.IsNaN(f.RatePerSecond) || f.RatePerSecond < 0 || f.RatePerSecond > workflow.MaxRatePerSecond:
		return fmt.Errorf("%w: task %q: rate %g is out of range", ErrInvalidArgument, t.ID, f.RatePerSecond)
	case f.RatePerSecond > 0 && (f.RateBurst < 1 || f.RateBurst > workflow.MaxRateBurst):
		return fmt.Errorf("%w: task %q: rate burst %d is out of range", ErrInvalidArgument, t.ID, f.RateBurst)
	case f.RatePerSecond == 0 && (f.RateKey != "" || f.RateBurst != 0):
		return fmt.Errorf("%w: task %q: a rate key or burst without a rate", ErrInvalidArgument, t.ID)
	}
	return nil
}

// FlowKeys are the keys of the claimable tasks a claim has to check under
// their locks: concurrency keys and rate-limit keys, each once, sorted.
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

// RateBucket is a rate-limit key's token bucket as stored: Tokens at
// UpdatedAt, refilled since at the rate of the task that takes one.
type RateBucket struct {
	Key       string
	Tokens    float64
	UpdatedAt time.Time
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

// retryAt notes that bucket b, refilled at rate, has its next token at
// b.UpdatedAt plus the time (1 - tokens) takes.
func (h *HeldBack) retryAt(b RateBucket, rate float64) {
	wait := time.Duration(math.Ceil((1 - b.Tokens) / rate * float64(time.Second)))
	if at := b.UpdatedAt.Add(wait); h.RateRetryAt.IsZero() || at.Before(h.RateRetryAt) {
		h.RateRetryAt = at
	}
}

// FlowGate is a claim's check of its tasks' keys, made in the claim's
// transaction under the locks of the keys (taken in sorted order, so two
// claims never wait on each other in a cycle): leased counts the LEASED
// tasks of each concurrency key and buckets holds the stored buckets of
// the rate keys (absent: full). It keeps the tasks, in the order locked,
// that fit — fewer than their limit leased, counting those kept before
// them, and a token in their bucket — and returns the buckets to store,
// one token taken per task kept. Every other task stays QUEUED: the claim
// does not write it. A kept task that the claim's decision then does not
// lease has used its slot and token for nothing, never more than allowed.
func FlowGate(locked []Claimable, leased map[string]int, buckets map[string]RateBucket, now time.Time) (kept []Claimable, taken []RateBucket, held HeldBack) {
	kept = make([]Claimable, 0, len(locked))
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
		taken = append(taken, b)
		if b.Tokens < 1 {
			held.RateEmptied++
			held.retryAt(b, touched[key])
		}
	}
	return kept, taken, held
}
