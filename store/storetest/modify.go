package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var modifyTests = []conformanceTest{
	{"ModifyState_ok", testModifyStateOK},
	{"ModifyState_toTerminal", testModifyStateToTerminal},
	{"ModifyState_ignoresOtherFields", testModifyStateIgnoresOtherFields},
	{"ModifyState_fnError", testModifyStateFnError},
	{"ModifyState_terminal", testModifyStateTerminal},
	{"ModifyState_notFound", testModifyStateNotFound},
	{"ModifyState_invalidTransition", testModifyStateInvalidTransition},
	{"ModifyState_invalidState", testModifyStateInvalidState},
	{"ModifyState_concurrent", testModifyStateConcurrent},
	{"ModifyState_nilFn", testModifyStateNilFn},
	{"ModifyState_fnKeepsReference", testModifyStateFnKeepsReference},
}

var retryTests = []conformanceTest{
	{"UpdateWithRetry_concurrent", testUpdateWithRetryConcurrent},
	{"UpdateWithRetry_cancel", testUpdateWithRetryCancel},
	{"UpdateWithRetry_fnError", testUpdateWithRetryFnError},
	{"UpdateWithRetry_notFound", testUpdateWithRetryNotFound},
	{"UpdateWithRetry_terminal", testUpdateWithRetryTerminal},
}

func testModifyStateOK(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Definition: "d", Input: json.RawMessage(`{"in":9007199254740993}`), State: counterState(0)})
	now := b.clock.Advance(time.Hour + 1)
	calls := 0
	got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
		calls++
		// fn sees the whole current instance, decoded.
		assertInstance(t, "instance given to fn", inst, cur)
		cur.Status = workflow.StatusRunning
		return increment(&cur.State)
	}, "start and count")
	if err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times, want 1", calls)
	}
	wantState := counterState(1)
	want := withVersion(inst, now, workflow.StatusRunning, wantState)
	assertInstance(t, "ModifyState result", want, got)
	assertInstance(t, "Get after ModifyState", want, b.get(t, inst.ID))
	assertHistory(t, "History", []store.HistoryEntry{
		{Version: 0, Status: workflow.StatusPending, State: counterState(0), At: store.Timestamp(clockStart), Cause: "create"},
		{Version: 1, Status: workflow.StatusRunning, State: wantState, At: store.Timestamp(now), Cause: "start and count"},
	}, b.history(t, inst.ID))

	// A change of state alone keeps the status; a no-op fn still writes a version.
	got, err = Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "count")
	if err != nil || got.Version != 2 || got.Status != workflow.StatusRunning || counter(got.State) != 2 {
		t.Errorf("second ModifyState = %+v, %v; want version 2, RUNNING, counter 2", got, err)
	}
	got, err = Modify(b.ctx, b.s, inst.ID, func(*workflow.Instance) error { return nil }, "touch")
	if err != nil || got.Version != 3 || counter(got.State) != 2 {
		t.Errorf("no-op ModifyState = %+v, %v; want version 3, counter 2", got, err)
	}
}

func testModifyStateToTerminal(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
		cur.Status = workflow.StatusCompleted
		return increment(&cur.State)
	}, "finish")
	if err != nil {
		t.Fatalf("ModifyState RUNNING → COMPLETED: %v", err)
	}
	if got.Status != workflow.StatusCompleted || got.Version != 1 || counter(got.State) != 1 {
		t.Errorf("ModifyState RUNNING → COMPLETED = status %s, version %d, counter %d", got.Status, got.Version, counter(got.State))
	}
	snap := b.snapshot(t, inst.ID)
	_, err = Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "late")
	wantErrorIs(t, "ModifyState after completion", err, workflow.ErrTerminal)
	b.unchanged(t, "ModifyState after completion", snap)
}

func testModifyStateIgnoresOtherFields(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{ID: "keep", Definition: "d", Input: json.RawMessage(`{"a":1}`), State: counterState(0)})
	other := b.create(t, store.CreateParams{ID: "other"})
	now := b.clock.Advance(time.Second)
	got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
		cur.ID = "other"
		cur.Definition = "changed"
		cur.Input = json.RawMessage(`{"b":2}`)
		cur.Version = 100
		cur.CreatedAt = time.Unix(0, 0)
		cur.UpdatedAt = time.Unix(0, 0)
		return increment(&cur.State)
	}, "sneaky")
	if err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	want := withVersion(inst, now, workflow.StatusPending, counterState(1))
	assertInstance(t, "ModifyState result", want, got)
	assertInstance(t, "Get after ModifyState", want, b.get(t, inst.ID))
	assertInstance(t, "the other instance", other, b.get(t, other.ID))
}

func testModifyStateFnError(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	b.clock.Advance(time.Second)
	got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
		cur.Status = workflow.StatusRunning
		_ = increment(&cur.State)
		return errBoom
	}, "boom")
	wantErrorIs(t, "ModifyState with a failing fn", err, errBoom)
	wantNilInstance(t, "ModifyState with a failing fn", got)
	b.unchanged(t, "ModifyState with a failing fn", snap)
}

func testModifyStateTerminal(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, status := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCancelled} {
		inst := b.terminalInstance(t, status)
		snap := b.snapshot(t, inst.ID)
		called := false
		got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
			called = true
			cur.Status = workflow.StatusRunning
			return nil
		}, "late")
		wantErrorIs(t, "ModifyState on a "+string(status)+" instance", err, workflow.ErrTerminal)
		wantNilInstance(t, "ModifyState on a "+string(status)+" instance", got)
		if called {
			t.Errorf("ModifyState called fn for a %s instance", status)
		}
		b.unchanged(t, "ModifyState on a "+string(status)+" instance", snap)
	}
}

func testModifyStateNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	called := false
	got, err := Modify(b.ctx, b.s, "missing", func(*workflow.Instance) error { called = true; return nil }, "x")
	wantErrorIs(t, "ModifyState on an unknown id", err, store.ErrNotFound)
	wantNilInstance(t, "ModifyState on an unknown id", got)
	if called {
		t.Error("fn was called for an unknown id")
	}
	b.wantEmpty(t, "ModifyState on an unknown id")
}

func testModifyStateInvalidTransition(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	for _, to := range []workflow.Status{workflow.StatusPaused, workflow.StatusCompleted, workflow.StatusFailed, "NOPE"} {
		got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
			cur.Status = to
			return increment(&cur.State)
		}, "jump")
		wantErrorIs(t, "ModifyState PENDING → "+string(to), err, workflow.ErrInvalidTransition)
		wantNilInstance(t, "ModifyState PENDING → "+string(to), got)
	}
	b.unchanged(t, "ModifyState with invalid transitions", snap)
}

func testModifyStateInvalidState(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	for name, change := range map[string]func(*workflow.State){
		"bad step id":         func(s *workflow.State) { s.Steps["{steps}"] = &workflow.StepState{Status: workflow.StepPending} },
		"unknown step status": func(s *workflow.State) { s.Steps["a"].Status = "DONE" },
		"nil step":            func(s *workflow.State) { s.Steps["a"] = nil },
	} {
		got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
			change(&cur.State)
			return nil
		}, "invalid")
		wantErrorIs(t, "ModifyState with "+name, err, workflow.ErrInvalidState)
		wantNilInstance(t, "ModifyState with "+name, got)
	}
	b.unchanged(t, "ModifyState with invalid states", snap)
}

// runConcurrently starts n goroutines at once, each running fn(i), and waits.
func runConcurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// checkCounterHistory fails t unless the history is versions 0..n and the
// counter at version v is v: no update was lost or applied twice.
func (b *bundle) checkCounterHistory(t testing.TB, id string, n int64) {
	t.Helper()
	hist := b.history(t, id)
	if int64(len(hist)) != n+1 {
		t.Errorf("history has %d rows, want %d (versions 0..%d)", len(hist), n+1, n)
	}
	for i, e := range hist {
		if e.Version != int64(i) {
			t.Errorf("history row %d has version %d, want %d", i, e.Version, i)
			break
		}
		if c := counter(e.State); c != i {
			t.Errorf("history version %d has counter %d, want %d", e.Version, c, i)
			break
		}
	}
}

func testModifyStateConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	// 32 goroutines at once queue on the row lock; two increments each
	// keep them overlapping (more only lengthened the run on SQLite under
	// the race detector).
	const workers, perWorker = 32, 2
	var failures atomic.Int64
	runConcurrently(workers, func(int) {
		for range perWorker {
			if _, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "inc"); err != nil {
				if failures.Add(1) <= 5 {
					t.Errorf("ModifyState under contention: %v", err)
				}
			}
		}
	})
	got := b.get(t, inst.ID)
	const n = workers * perWorker
	if counter(got.State) != n || got.Version != n {
		t.Errorf("after %d concurrent increments: counter %d, version %d; want %d, %d (errors: %d)", n, counter(got.State), got.Version, n, n, failures.Load())
	}
	b.checkCounterHistory(t, inst.ID, n)
}

// fastPolicy retries quickly and generously: contention in tests must resolve.
func fastPolicy(retries *atomic.Int64) store.RetryPolicy {
	return store.RetryPolicy{
		Base: time.Millisecond, Factor: 2, Cap: 50 * time.Millisecond, MaxAttempts: 1000,
		OnRetry: func(int, error) { retries.Add(1) },
	}
}

func testUpdateWithRetryConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	// 20 goroutines read-modify-write one row at once: most attempts
	// conflict and retry (the log shows how many). Attempts grow with the
	// square of the goroutines, and 40 took minutes on SQLite under -race.
	const workers, perWorker = 20, 1
	var succeeded, failures, retries atomic.Int64
	policy := fastPolicy(&retries)
	start := time.Now()
	runConcurrently(workers, func(int) {
		for range perWorker {
			_, err := store.UpdateWithRetry(b.ctx, b.s, inst.ID, policy, increment, "inc")
			if err != nil {
				if failures.Add(1) <= 5 {
					t.Errorf("UpdateWithRetry under contention: %v", err)
				}
				continue
			}
			succeeded.Add(1)
		}
	})
	t.Logf("%d increments by %d goroutines in %v with %d retries", workers*perWorker, workers, time.Since(start), retries.Load())
	got := b.get(t, inst.ID)
	n := succeeded.Load()
	if int64(counter(got.State)) != n || got.Version != n {
		t.Errorf("after %d successful increments: counter %d, version %d (lost or doubled updates)", n, counter(got.State), got.Version)
	}
	if n != workers*perWorker {
		t.Errorf("%d of %d increments succeeded", n, workers*perWorker)
	}
	b.checkCounterHistory(t, inst.ID, n)
}

func testUpdateWithRetryCancel(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	// Cancel ~50ms into the first backoff (armed by the first retry, so a slow
	// machine cannot cancel before any attempt conflicted).
	var (
		retries     atomic.Int64
		arm         sync.Once
		cancelledAt atomic.Pointer[time.Time]
	)
	policy := store.RetryPolicy{
		Base: 10 * time.Second, Factor: 2, Cap: time.Minute, MaxAttempts: 1000,
		OnRetry: func(int, error) {
			retries.Add(1)
			arm.Do(func() {
				time.AfterFunc(50*time.Millisecond, func() {
					now := time.Now()
					cancelledAt.Store(&now)
					cancel()
				})
			})
		},
	}
	// Every attempt conflicts: another writer changes the instance between the
	// read and the write.
	interfere := func(s *workflow.State) error {
		if _, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error { return increment(&cur.State) }, "interfere"); err != nil {
			return fmt.Errorf("interfering ModifyState: %w", err)
		}
		return increment(s)
	}
	got, err := store.UpdateWithRetry(ctx, b.s, inst.ID, policy, interfere, "never")
	returned := time.Now()
	wantErrorIs(t, "UpdateWithRetry cancelled during backoff", err, context.Canceled)
	wantNilInstance(t, "UpdateWithRetry cancelled during backoff", got)
	if at := cancelledAt.Load(); at == nil {
		t.Errorf("UpdateWithRetry returned %v before the context was cancelled", err)
	} else if d := returned.Sub(*at); d > time.Second {
		t.Errorf("UpdateWithRetry returned %v after cancellation, want well under 1s", d)
	}
	if retries.Load() == 0 {
		t.Error("no attempt conflicted; the test did not exercise the backoff")
	}
	for _, e := range b.history(t, inst.ID) {
		if e.Cause == "never" {
			t.Errorf("history version %d was written by the cancelled update", e.Version)
		}
	}
}

func testUpdateWithRetryFnError(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	var retries atomic.Int64
	calls := 0
	got, err := store.UpdateWithRetry(b.ctx, b.s, inst.ID, fastPolicy(&retries), func(*workflow.State) error {
		calls++
		return errBoom
	}, "boom")
	wantErrorIs(t, "UpdateWithRetry with a failing fn", err, errBoom)
	wantNilInstance(t, "UpdateWithRetry with a failing fn", got)
	if calls != 1 || retries.Load() != 0 {
		t.Errorf("fn called %d times with %d retries; a non-conflict error must not be retried", calls, retries.Load())
	}
	b.unchanged(t, "UpdateWithRetry with a failing fn", snap)
}

func testUpdateWithRetryNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	var retries atomic.Int64
	got, err := store.UpdateWithRetry(b.ctx, b.s, "missing", fastPolicy(&retries), increment, "x")
	wantErrorIs(t, "UpdateWithRetry on an unknown id", err, store.ErrNotFound)
	wantNilInstance(t, "UpdateWithRetry on an unknown id", got)
	if retries.Load() != 0 {
		t.Errorf("%d retries for an unknown id, want 0", retries.Load())
	}
}

func testUpdateWithRetryTerminal(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.terminalInstance(t, workflow.StatusCompleted)
	snap := b.snapshot(t, inst.ID)
	var retries atomic.Int64
	got, err := store.UpdateWithRetry(b.ctx, b.s, inst.ID, fastPolicy(&retries), increment, "late")
	wantErrorIs(t, "UpdateWithRetry on a COMPLETED instance", err, workflow.ErrTerminal)
	wantNilInstance(t, "UpdateWithRetry on a COMPLETED instance", got)
	if retries.Load() != 0 {
		t.Errorf("%d retries for a terminal instance, want 0", retries.Load())
	}
	b.unchanged(t, "UpdateWithRetry on a COMPLETED instance", snap)
}

// Every backend refuses a nil function the same way, writing nothing.
func testModifyStateNilFn(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	got, err := Modify(b.ctx, b.s, inst.ID, nil, "nil")
	if got != nil {
		t.Errorf("ModifyState with a nil fn returned an instance: %+v", got)
	}
	wantErrorIs(t, "ModifyState with a nil fn", err, store.ErrInvalidArgument)
	b.unchanged(t, "ModifyState with a nil fn", snap)
}

// fn gets a copy: changing the state it was given after ModifyState
// returned changes neither what is stored nor the instance returned.
func testModifyStateFnKeepsReference(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	var kept *workflow.Instance
	got, err := Modify(b.ctx, b.s, inst.ID, func(cur *workflow.Instance) error {
		kept = cur
		return increment(&cur.State)
	}, "keep")
	if err != nil {
		t.Fatalf("ModifyState: %v", err)
	}
	if err := kept.State.SetVar("later", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.State.Variables["later"]; ok {
		t.Errorf("the instance ModifyState returned shares its state with fn's argument: %s", got.State.Variables)
	}
	if _, ok := b.get(t, inst.ID).State.Variables["later"]; ok {
		t.Errorf("the stored state changed after ModifyState returned")
	}
}
