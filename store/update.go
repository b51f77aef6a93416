package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/flowd/flowd/workflow"
)

// UpdateState applies fn to the state of instance id if it is at
// expectedVersion, and writes the result with version+1.
//
// The state at a given version never changes, so reading it without a lock and
// writing it with the guarded write (Apply, guarded by that version) is as
// safe as locking, comparing and writing. Errors: ErrNotFound; workflow.ErrTerminal;
// *ConflictError; fn's own error, unchanged, which changes nothing.
func UpdateState(ctx context.Context, q Querier, id string, expectedVersion int64, fn func(*workflow.State) error, cause string) (*workflow.Instance, error) {
	inst, err := q.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return applyAndReplace(ctx, q, inst, expectedVersion, fn, cause)
}

func applyAndReplace(ctx context.Context, q Querier, inst *workflow.Instance, expectedVersion int64, fn func(*workflow.State) error, cause string) (*workflow.Instance, error) {
	if inst.Status.Terminal() {
		return nil, fmt.Errorf("workflow %q is %s: %w", inst.ID, inst.Status, workflow.ErrTerminal)
	}
	if inst.Version != expectedVersion {
		return nil, &ConflictError{ID: inst.ID, Expected: expectedVersion, Actual: inst.Version}
	}
	state := inst.State
	if err := fn(&state); err != nil {
		return nil, err // the caller's own error, as it made it
	}
	return q.Apply(ctx, &Write{ID: inst.ID, ExpectedVersion: expectedVersion, From: inst.Status,
		Status: inst.Status, State: state, Deadline: inst.Deadline, Cause: cause})
}

// RetryPolicy shapes the backoff of UpdateWithRetry: before retry n (from 0) it
// sleeps a random duration in [0, min(Cap, Base·Factorⁿ)] ("full jitter"), so
// writers that collided do not collide again in lock-step. Zero fields take the
// values of DefaultRetryPolicy, so a partly filled policy never spins.
type RetryPolicy struct {
	Base        time.Duration
	Factor      float64
	Cap         time.Duration
	MaxAttempts int // attempts in all, including the first
	// OnRetry, if set, is called before each backoff sleep (for metrics).
	OnRetry func(attempt int, err error)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	if p.Base <= 0 {
		p.Base = d.Base
	}
	if !(p.Factor >= 1) { // also NaN
		p.Factor = d.Factor
	}
	if p.Cap <= 0 {
		p.Cap = d.Cap
	}
	if p.MaxAttempts < 1 {
		p.MaxAttempts = d.MaxAttempts
	}
	return p
}

// DefaultRetryPolicy backs off 100 ms·2ⁿ, with full jitter and a cap.
var DefaultRetryPolicy = RetryPolicy{Base: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, MaxAttempts: 10}

// Backoff returns the sleep before retry n (0-based): full jitter under the cap.
func (p RetryPolicy) Backoff(n int) time.Duration {
	p = p.withDefaults()
	ceiling := float64(p.Base)
	for i := 0; i < n && ceiling < float64(p.Cap); i++ {
		ceiling *= p.Factor
	}
	if ceiling > float64(p.Cap) {
		ceiling = float64(p.Cap)
	}
	if !(ceiling > 0) { // also catches NaN (a NaN Factor)
		return 0
	}
	// float64(math.MaxInt64) rounds up to 2⁶³, which overflows int64: a Cap
	// near the largest Duration must not make Int64N panic.
	if ceiling >= math.MaxInt64 {
		return time.Duration(rand.Int64())
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// Retry runs op until it succeeds, fails with an error that is not a conflict,
// runs out of attempts, or ctx is done. It sleeps p.Backoff between attempts and
// returns ctx's error promptly when cancelled during a sleep. After the last
// attempt the last conflict is returned.
func Retry(ctx context.Context, p RetryPolicy, op func(ctx context.Context) error) error {
	p = p.withDefaults()
	attempts := p.MaxAttempts
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := op(ctx)
		if err == nil || !Retryable(err) || n+1 >= attempts {
			if err != nil && Retryable(err) {
				return fmt.Errorf("gave up after %d attempts: %w", attempts, err)
			}
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(n+1, err)
		}
		t := time.NewTimer(p.Backoff(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// UpdateWithRetry reads the instance, applies fn and writes it with the version
// it read; on a conflict it backs off and starts over from a fresh read. fn may
// run several times and must depend only on the state it is given.
//
// Under heavy contention on one instance prefer the engine's ModifyState,
// whose writers of one instance take turns.
func UpdateWithRetry(ctx context.Context, q Querier, id string, p RetryPolicy, fn func(*workflow.State) error, cause string) (*workflow.Instance, error) {
	var out *workflow.Instance
	err := Retry(ctx, p, func(ctx context.Context) error {
		inst, err := q.Get(ctx, id)
		if err != nil {
			return err
		}
		out, err = applyAndReplace(ctx, q, inst, inst.Version, fn, cause)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
