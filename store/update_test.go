package store_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var errBoom = errors.New("boom")

func TestRetryPolicyBackoffBounds(t *testing.T) {
	for _, p := range []store.RetryPolicy{
		store.DefaultRetryPolicy,
		{Base: time.Millisecond, Factor: 2, Cap: 50 * time.Millisecond},
		{Base: 10 * time.Millisecond, Factor: 1.5, Cap: time.Second},
		{Base: time.Second, Factor: 2, Cap: 100 * time.Millisecond}, // cap below base
		{Base: 3 * time.Millisecond, Factor: 1, Cap: time.Hour},
	} {
		for n := range 40 {
			// min(Cap, Base·Factorⁿ), computed in float64: Base·Factorⁿ may not fit a Duration.
			ceiling := time.Duration(math.Min(float64(p.Cap), float64(p.Base)*math.Pow(p.Factor, float64(n))))
			const samples = 300
			first, varies, high := p.Backoff(n), false, false
			for range samples {
				d := p.Backoff(n)
				// 1 ns of slack: Backoff multiplies step by step, math.Pow rounds once.
				if d < 0 || d > ceiling+1 {
					t.Fatalf("%+v: Backoff(%d) = %v, outside [0, %v]", p, n, d, ceiling)
				}
				varies = varies || d != first
				high = high || d > ceiling/2
			}
			if ceiling < time.Microsecond {
				continue // too few values to draw from to demand variety
			}
			// Full jitter: writers that collided must not retry in lock-step.
			if !varies {
				t.Errorf("%+v: Backoff(%d) returned %v %d times: no jitter", p, n, first, samples)
			}
			if !high {
				t.Errorf("%+v: Backoff(%d) never exceeded half its ceiling %v in %d samples", p, n, ceiling, samples)
			}
		}
	}
}

func TestRetryPolicyBackoffDegenerate(t *testing.T) {
	for _, c := range []struct {
		p   store.RetryPolicy
		max time.Duration
	}{
		// Zero or nonsensical fields take DefaultRetryPolicy's values.
		{store.RetryPolicy{}, store.DefaultRetryPolicy.Cap},
		{store.RetryPolicy{Base: 0, Factor: 2, Cap: time.Second}, time.Second},
		{store.RetryPolicy{Base: time.Second, Factor: 2}, store.DefaultRetryPolicy.Cap},
		{store.RetryPolicy{Base: -time.Second, Factor: 2, Cap: time.Second}, time.Second},
		{store.RetryPolicy{Base: time.Second, Factor: -2, Cap: time.Hour}, time.Hour},
		{store.RetryPolicy{Base: time.Second, Factor: 0.5, Cap: time.Hour}, time.Hour},
		// Caps near the largest Duration used to overflow into a panic.
		{store.RetryPolicy{Base: 100 * time.Millisecond, Factor: 2, Cap: math.MaxInt64}, math.MaxInt64},
		{store.RetryPolicy{Base: math.MaxInt64, Factor: 2, Cap: math.MaxInt64}, math.MaxInt64},
		{store.RetryPolicy{Base: time.Second, Factor: math.Inf(1), Cap: math.MaxInt64}, math.MaxInt64},
		{store.RetryPolicy{Base: time.Second, Factor: math.NaN(), Cap: time.Hour}, time.Hour},
	} {
		for _, n := range []int{0, 1, 2, 63, 64, 1000} {
			for range 50 {
				if d := c.p.Backoff(n); d < 0 || d > c.max {
					t.Fatalf("%+v: Backoff(%d) = %v, want within [0, %v]", c.p, n, d, c.max)
				}
			}
		}
	}
}

func conflict(actual int64) error {
	return &store.ConflictError{ID: "w", Expected: actual - 1, Actual: actual}
}

func TestRetrySucceedsAfterConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var retried []int
		p := store.RetryPolicy{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, MaxAttempts: 10,
			OnRetry: func(attempt int, err error) {
				if !errors.Is(err, store.ErrConflict) {
					t.Errorf("OnRetry got %v, want the conflict", err)
				}
				retried = append(retried, attempt)
			}}
		calls := 0
		start := time.Now()
		err := store.Retry(t.Context(), p, func(context.Context) error {
			calls++
			if calls < 3 {
				return conflict(int64(calls))
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Errorf("Retry = %v after %d calls, want nil after 3", err, calls)
		}
		if diff := cmp.Diff([]int{1, 2}, retried); diff != "" {
			t.Errorf("OnRetry attempts (-want +got):\n%s", diff)
		}
		if d := time.Since(start); d > 300*time.Millisecond {
			t.Errorf("two backoffs took %v, more than 100ms + 200ms", d)
		}
	})
}

func TestRetrySleepsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := store.RetryPolicy{Base: time.Second, Factor: 2, Cap: time.Minute, MaxAttempts: 6}
		var retryAt time.Time
		p.OnRetry = func(int, error) { retryAt = time.Now() }
		n := 0
		total := time.Duration(0)
		_ = store.Retry(t.Context(), p, func(context.Context) error {
			if n > 0 {
				slept := time.Since(retryAt)
				ceiling := min(p.Cap, p.Base<<(n-1))
				if slept < 0 || slept > ceiling {
					t.Errorf("slept %v before attempt %d, want within [0, %v]", slept, n+1, ceiling)
				}
				total += slept
			}
			n++
			return conflict(int64(n))
		})
		if total == 0 {
			t.Errorf("Retry never slept between %d attempts", n)
		}
	})
}

func TestRetryStopsOnOtherErrors(t *testing.T) {
	for _, want := range []error{errBoom, store.NotFound("w"), workflow.ErrTerminal, context.Canceled} {
		calls, retries := 0, 0
		p := store.RetryPolicy{Base: time.Millisecond, Factor: 2, Cap: time.Second, MaxAttempts: 10, OnRetry: func(int, error) { retries++ }}
		err := store.Retry(t.Context(), p, func(context.Context) error { calls++; return want })
		if err != want { //nolint:errorlint // returned unchanged
			t.Errorf("Retry returned %v, want %v unchanged", err, want)
		}
		if calls != 1 || retries != 0 {
			t.Errorf("%v: %d calls, %d retries; want 1, 0", want, calls, retries)
		}
	}
	if err := store.Retry(t.Context(), store.DefaultRetryPolicy, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Retry of a succeeding op = %v", err)
	}
}

func TestRetryMaxAttempts(t *testing.T) {
	for _, c := range []struct{ max, calls int }{{4, 4}, {1, 1}, {0, store.DefaultRetryPolicy.MaxAttempts}, {-3, store.DefaultRetryPolicy.MaxAttempts}} {
		synctest.Test(t, func(t *testing.T) {
			calls, retries := 0, 0
			p := store.RetryPolicy{Base: time.Second, Factor: 2, Cap: time.Minute, MaxAttempts: c.max, OnRetry: func(int, error) { retries++ }}
			err := store.Retry(t.Context(), p, func(context.Context) error { calls++; return conflict(int64(calls)) })
			if calls != c.calls || retries != c.calls-1 {
				t.Errorf("MaxAttempts %d: %d calls, %d retries; want %d, %d", c.max, calls, retries, c.calls, c.calls-1)
			}
			if !errors.Is(err, store.ErrConflict) || !store.Retryable(err) {
				t.Errorf("MaxAttempts %d: error %v, want the last conflict wrapped", c.max, err)
			}
			var ce *store.ConflictError
			if !errors.As(err, &ce) || ce.Actual != int64(calls) {
				t.Errorf("MaxAttempts %d: error %v, want the last conflict (actual %d)", c.max, err, calls)
			}
		})
	}
}

func TestRetryCancelledDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		p := store.RetryPolicy{Base: time.Hour, Factor: 2, Cap: 24 * time.Hour, MaxAttempts: 1000}
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		calls := 0
		err := store.Retry(ctx, p, func(context.Context) error { calls++; return conflict(1) })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Retry = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Retry returned %v after the start, want exactly 1s (when ctx was cancelled)", d)
		}
		if calls == 0 {
			t.Error("op was never called")
		}
	})
}

func TestRetryDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		p := store.RetryPolicy{Base: time.Hour, Factor: 2, Cap: 24 * time.Hour, MaxAttempts: 1000}
		start := time.Now()
		err := store.Retry(ctx, p, func(context.Context) error { return conflict(1) })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Retry = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Retry returned after %v, want 5s", d)
		}
	})
}

func TestRetryCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := store.Retry(ctx, store.DefaultRetryPolicy, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("Retry on a cancelled context = %v, op called %v; want context.Canceled, not called", err, called)
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errBoom, false},
		{store.NotFound("x"), false},
		{store.ErrConflict, true},
		{conflict(1), true},
		{&store.ConflictError{Reason: "serialization failure", Actual: -1}, true},
		{errors.Join(errBoom, conflict(2)), true},
		{&store.StatusMismatchError{ID: "x"}, false},
	} {
		if got := store.Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// fakeQuerier holds one instance in memory. Apply conflicts (after a
// concurrent writer's version bump) conflictsLeft times before it writes.
type fakeQuerier struct {
	store.Querier // other methods are not used: calling one panics

	mu            sync.Mutex
	inst          workflow.Instance
	conflictsLeft int
	replaces      int
	lastCause     string
}

func newFake(status workflow.Status, version int64) *fakeQuerier {
	st := workflow.State{}
	_ = st.SetVar("counter", 0)
	return &fakeQuerier{inst: workflow.Instance{ID: "w", Status: status, Version: version, State: st}}
}

func (f *fakeQuerier) Get(_ context.Context, id string) (*workflow.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != f.inst.ID {
		return nil, store.NotFound(id)
	}
	c := f.inst
	c.State = f.inst.State.Clone()
	return &c, nil
}

func (f *fakeQuerier) Apply(_ context.Context, w *store.Write) (*workflow.Instance, error) {
	id, expected, st, cause := w.ID, w.ExpectedVersion, w.State, w.Cause
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replaces++
	if err := st.Validate(); err != nil {
		return nil, err
	}
	if f.conflictsLeft > 0 {
		f.conflictsLeft--
		f.inst.Version++
	}
	if expected != f.inst.Version {
		return nil, &store.ConflictError{ID: id, Expected: expected, Actual: f.inst.Version}
	}
	f.inst.Version++
	f.inst.State = st.Clone()
	f.lastCause = cause
	c := f.inst
	return &c, nil
}

func counterOf(t *testing.T, s workflow.State) int {
	t.Helper()
	var n int
	if _, err := s.Var("counter", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func increment(s *workflow.State) error {
	var n int
	if _, err := s.Var("counter", &n); err != nil {
		return err
	}
	return s.SetVar("counter", n+1)
}

func TestUpdateState(t *testing.T) {
	ctx := t.Context()
	t.Run("ok", func(t *testing.T) {
		f := newFake(workflow.StatusRunning, 3)
		got, err := store.UpdateState(ctx, f, "w", 3, increment, "inc")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 4 || counterOf(t, got.State) != 1 || f.lastCause != "inc" || f.replaces != 1 {
			t.Errorf("UpdateState = version %d, counter %d, cause %q, %d writes", got.Version, counterOf(t, got.State), f.lastCause, f.replaces)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		f := newFake(workflow.StatusRunning, 3)
		called := false
		_, err := store.UpdateState(ctx, f, "w", 2, func(*workflow.State) error { called = true; return nil }, "x")
		var ce *store.ConflictError
		if !errors.As(err, &ce) || *ce != (store.ConflictError{ID: "w", Expected: 2, Actual: 3}) {
			t.Errorf("UpdateState with a stale version = %v, want ConflictError{w, 2, 3}", err)
		}
		if called || f.replaces != 0 {
			t.Errorf("fn called %v, %d writes; want neither", called, f.replaces)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		for _, s := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCancelled} {
			f := newFake(s, 3)
			called := false
			// Terminal wins over a stale version.
			for _, v := range []int64{3, 1} {
				_, err := store.UpdateState(ctx, f, "w", v, func(*workflow.State) error { called = true; return nil }, "x")
				if !errors.Is(err, workflow.ErrTerminal) {
					t.Errorf("UpdateState on a %s instance at %d = %v, want ErrTerminal", s, v, err)
				}
			}
			if called || f.replaces != 0 {
				t.Errorf("fn called %v, %d writes; want neither", called, f.replaces)
			}
		}
	})
	t.Run("fnError", func(t *testing.T) {
		f := newFake(workflow.StatusRunning, 0)
		_, err := store.UpdateState(ctx, f, "w", 0, func(*workflow.State) error { return errBoom }, "x")
		if !errors.Is(err, errBoom) || f.replaces != 0 {
			t.Errorf("UpdateState with a failing fn = %v, %d writes; want errBoom wrapped, none", err, f.replaces)
		}
	})
	t.Run("notFound", func(t *testing.T) {
		f := newFake(workflow.StatusRunning, 0)
		_, err := store.UpdateState(ctx, f, "missing", 0, increment, "x")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdateState on an unknown id = %v, want ErrNotFound", err)
		}
	})
	t.Run("invalidState", func(t *testing.T) {
		f := newFake(workflow.StatusRunning, 0)
		_, err := store.UpdateState(ctx, f, "w", 0, func(s *workflow.State) error {
			s.Steps = map[string]*workflow.StepState{"a,b": {Status: workflow.StepPending}}
			return nil
		}, "x")
		if !errors.Is(err, workflow.ErrInvalidState) {
			t.Errorf("UpdateState producing a bad step id = %v, want ErrInvalidState", err)
		}
	})
}

func TestUpdateWithRetry(t *testing.T) {
	t.Run("retriesFromAFreshRead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(workflow.StatusRunning, 0)
			f.conflictsLeft = 2
			var seen []int64
			retries := 0
			p := store.RetryPolicy{Base: 10 * time.Millisecond, Factor: 2, Cap: time.Second, MaxAttempts: 5, OnRetry: func(int, error) { retries++ }}
			got, err := store.UpdateWithRetry(t.Context(), f, "w", p, func(s *workflow.State) error {
				seen = append(seen, int64(counterOf(t, *s)))
				return increment(s)
			}, "inc")
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != 3 || counterOf(t, got.State) != 1 || retries != 2 || len(seen) != 3 {
				t.Errorf("UpdateWithRetry = version %d, counter %d after %d retries and %d fn calls; want 3, 1, 2, 3",
					got.Version, counterOf(t, got.State), retries, len(seen))
			}
			// Each attempt starts from the stored state, not the previous attempt's result.
			if diff := cmp.Diff([]int64{0, 0, 0}, seen); diff != "" {
				t.Errorf("counters fn saw (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("givesUp", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(workflow.StatusRunning, 0)
			f.conflictsLeft = 100
			p := store.RetryPolicy{Base: 10 * time.Millisecond, Factor: 2, Cap: time.Second, MaxAttempts: 3}
			got, err := store.UpdateWithRetry(t.Context(), f, "w", p, increment, "inc")
			if !errors.Is(err, store.ErrConflict) || got != nil || f.replaces != 3 {
				t.Errorf("UpdateWithRetry = %v, %v after %d writes; want a conflict, nil, 3", got, err, f.replaces)
			}
		})
	})
	t.Run("fnErrorIsNotRetried", func(t *testing.T) {
		f := newFake(workflow.StatusRunning, 0)
		calls := 0
		_, err := store.UpdateWithRetry(t.Context(), f, "w", store.DefaultRetryPolicy, func(*workflow.State) error { calls++; return errBoom }, "x")
		if !errors.Is(err, errBoom) || calls != 1 {
			t.Errorf("UpdateWithRetry with a failing fn = %v after %d calls; want errBoom after 1", err, calls)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(workflow.StatusRunning, 0)
			f.conflictsLeft = 1 << 30
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(50*time.Millisecond, cancel)
			p := store.RetryPolicy{Base: 10 * time.Second, Factor: 2, Cap: time.Minute, MaxAttempts: 1000}
			start := time.Now()
			_, err := store.UpdateWithRetry(ctx, f, "w", p, increment, "x")
			if !errors.Is(err, context.Canceled) || time.Since(start) != 50*time.Millisecond {
				t.Errorf("UpdateWithRetry = %v after %v, want context.Canceled after 50ms", err, time.Since(start))
			}
		})
	})
}
