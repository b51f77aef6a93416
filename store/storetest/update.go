package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var updateTests = []conformanceTest{
	{"UpdateState_ok", testUpdateStateOK},
	{"UpdateState_conflict", testUpdateStateConflict},
	{"UpdateState_notFound", testUpdateStateNotFound},
	{"UpdateState_fnError", testUpdateStateFnError},
	{"UpdateState_terminal", testUpdateStateTerminal},
	{"UpdateState_invalidState", testUpdateStateInvalidState},
	{"ReplaceState_ok", testReplaceStateOK},
	{"ReplaceState_conflict", testReplaceStateConflict},
	{"ReplaceState_notFound", testReplaceStateNotFound},
	{"ReplaceState_terminal", testReplaceStateTerminal},
	{"ReplaceState_invalidState", testReplaceStateInvalidState},
}

// withVersion returns a copy of inst as it should look after one change at now.
func withVersion(inst *workflow.Instance, now time.Time, status workflow.Status, state workflow.State) *workflow.Instance {
	c := *inst
	c.Version++
	c.UpdatedAt = store.Timestamp(now)
	c.Status = status
	c.State = state
	return &c
}

// terminalInstance returns an instance that reached status (COMPLETED or
// CANCELLED) through TransitionStatus, with counterState(0).
func (b *bundle) terminalInstance(t testing.TB, status workflow.Status) *workflow.Instance {
	t.Helper()
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0)})
	return b.transition(t, inst.ID, workflow.StatusRunning, status)
}

func testUpdateStateOK(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusRunning, State: counterState(0), Input: json.RawMessage(`{"k":"v"}`)})
	now := b.clock.Advance(1500*time.Millisecond + 7)
	change := func(s *workflow.State) error {
		if err := s.SetVar("note", "hello"); err != nil {
			return err
		}
		return increment(s)
	}
	wantState := inst.State.Clone()
	if err := change(&wantState); err != nil {
		t.Fatal(err)
	}
	got, err := store.UpdateState(b.ctx, b.s, inst.ID, 0, change, "bump")
	if err != nil {
		t.Fatalf("UpdateState: %v", err)
	}
	want := withVersion(inst, now, workflow.StatusRunning, wantState)
	assertInstance(t, "UpdateState result", want, got)
	assertInstance(t, "Get after UpdateState", want, b.get(t, inst.ID))
	assertHistory(t, "History", []store.HistoryEntry{
		{Version: 0, Status: workflow.StatusRunning, State: counterState(0), At: store.Timestamp(clockStart), Cause: "create"},
		{Version: 1, Status: workflow.StatusRunning, State: wantState, At: store.Timestamp(now), Cause: "bump"},
	}, b.history(t, inst.ID))

	// And again from the new version.
	got, err = store.UpdateState(b.ctx, b.s, inst.ID, 1, increment, "bump again")
	if err != nil {
		t.Fatalf("second UpdateState: %v", err)
	}
	if got.Version != 2 || counter(got.State) != 2 {
		t.Errorf("second UpdateState: version %d, counter %d; want 2, 2", got.Version, counter(got.State))
	}
}

func testUpdateStateConflict(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	if _, err := store.UpdateState(b.ctx, b.s, inst.ID, 0, increment, "first"); err != nil {
		t.Fatalf("UpdateState: %v", err)
	}
	snap := b.snapshot(t, inst.ID)
	b.clock.Advance(time.Second)
	for _, expected := range []int64{0, 2, 100} {
		called := false
		got, err := store.UpdateState(b.ctx, b.s, inst.ID, expected, func(s *workflow.State) error {
			called = true
			return increment(s)
		}, "stale")
		wantConflict(t, "UpdateState with a stale version", err, inst.ID, expected, 1)
		wantNilInstance(t, "UpdateState with a stale version", got)
		if called {
			t.Errorf("UpdateState(expected %d) called fn although the version did not match", expected)
		}
	}
	b.unchanged(t, "UpdateState with a stale version", snap)
}

func testUpdateStateNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	called := false
	got, err := store.UpdateState(b.ctx, b.s, "missing", 0, func(*workflow.State) error { called = true; return nil }, "x")
	wantErrorIs(t, "UpdateState on an unknown id", err, store.ErrNotFound)
	wantNilInstance(t, "UpdateState on an unknown id", got)
	if called {
		t.Error("fn was called for an unknown id")
	}
	b.wantEmpty(t, "UpdateState on an unknown id")
}

func testUpdateStateFnError(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	b.clock.Advance(time.Second)
	got, err := store.UpdateState(b.ctx, b.s, inst.ID, 0, func(s *workflow.State) error {
		_ = increment(s) // a change that must not be written
		return errBoom
	}, "boom")
	wantErrorIs(t, "UpdateState with a failing fn", err, errBoom)
	wantNilInstance(t, "UpdateState with a failing fn", got)
	b.unchanged(t, "UpdateState with a failing fn", snap)
}

func testUpdateStateTerminal(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, status := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCancelled} {
		inst := b.terminalInstance(t, status)
		snap := b.snapshot(t, inst.ID)
		b.clock.Advance(time.Second)
		got, err := store.UpdateState(b.ctx, b.s, inst.ID, inst.Version, increment, "late")
		wantErrorIs(t, "UpdateState on a "+string(status)+" instance", err, workflow.ErrTerminal)
		wantNilInstance(t, "UpdateState on a "+string(status)+" instance", got)
		b.unchanged(t, "UpdateState on a "+string(status)+" instance", snap)
	}
}

func testUpdateStateInvalidState(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	b.clock.Advance(time.Second)
	got, err := store.UpdateState(b.ctx, b.s, inst.ID, 0, func(s *workflow.State) error {
		s.Steps["bad id"] = &workflow.StepState{Status: workflow.StepPending}
		return increment(s)
	}, "invalid")
	wantErrorIs(t, "UpdateState producing a bad step id", err, workflow.ErrInvalidState)
	wantNilInstance(t, "UpdateState producing a bad step id", got)
	b.unchanged(t, "UpdateState producing a bad step id", snap)
}

// replacement is a state that shares nothing with counterState.
func replacement() workflow.State {
	return workflow.State{
		Variables: map[string]json.RawMessage{"other": json.RawMessage(`[1,2,9007199254740993]`)},
		Steps:     map[string]*workflow.StepState{"z": {Status: workflow.StepWaiting, Attempts: 2}},
		Extra:     map[string]json.RawMessage{"extra": json.RawMessage(`{"kept":true}`)},
	}
}

func testReplaceStateOK(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{Status: workflow.StatusPaused, State: counterState(3)})
	now := b.clock.Advance(time.Minute)
	got, err := Replace(b.ctx, b.s, inst.ID, 0, replacement(), "replace")
	if err != nil {
		t.Fatalf("ReplaceState: %v", err)
	}
	want := withVersion(inst, now, workflow.StatusPaused, replacement())
	assertInstance(t, "ReplaceState result", want, got)
	assertInstance(t, "Get after ReplaceState", want, b.get(t, inst.ID))
	hist := b.history(t, inst.ID)
	assertHistory(t, "History", []store.HistoryEntry{
		{Version: 0, Status: workflow.StatusPaused, State: counterState(3), At: store.Timestamp(clockStart), Cause: "create"},
		{Version: 1, Status: workflow.StatusPaused, State: replacement(), At: store.Timestamp(now), Cause: "replace"},
	}, hist)

	// An empty state replaces everything.
	now = b.clock.Advance(time.Second)
	got, err = Replace(b.ctx, b.s, inst.ID, 1, workflow.State{}, "clear")
	if err != nil {
		t.Fatalf("second ReplaceState: %v", err)
	}
	assertInstance(t, "second ReplaceState", withVersion(want, now, workflow.StatusPaused, workflow.State{}), got)
}

func testReplaceStateConflict(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	for _, expected := range []int64{1, 42} {
		got, err := Replace(b.ctx, b.s, inst.ID, expected, replacement(), "stale")
		wantConflict(t, "ReplaceState at version 0", err, inst.ID, expected, 0)
		wantNilInstance(t, "ReplaceState at version 0", got)
	}
	b.unchanged(t, "ReplaceState with a stale version", snap)

	if _, err := Replace(b.ctx, b.s, inst.ID, 0, counterState(1), "ok"); err != nil {
		t.Fatalf("ReplaceState: %v", err)
	}
	snap = b.snapshot(t, inst.ID)
	got, err := Replace(b.ctx, b.s, inst.ID, 0, replacement(), "stale")
	wantConflict(t, "ReplaceState at version 1", err, inst.ID, 0, 1)
	wantNilInstance(t, "ReplaceState at version 1", got)
	b.unchanged(t, "ReplaceState with a stale version", snap)
}

func testReplaceStateNotFound(t *testing.T, h Harness) {
	b := setup(t, h)
	got, err := Replace(b.ctx, b.s, "missing", 0, replacement(), "x")
	wantErrorIs(t, "ReplaceState on an unknown id", err, store.ErrNotFound)
	wantNilInstance(t, "ReplaceState on an unknown id", got)
	b.wantEmpty(t, "ReplaceState on an unknown id")
}

func testReplaceStateTerminal(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, status := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCancelled} {
		inst := b.terminalInstance(t, status)
		snap := b.snapshot(t, inst.ID)
		// Terminal wins over a version mismatch: the request would fail anyway.
		for _, expected := range []int64{inst.Version, inst.Version - 1, inst.Version + 7} {
			got, err := Replace(b.ctx, b.s, inst.ID, expected, replacement(), "late")
			wantErrorIs(t, "ReplaceState on a "+string(status)+" instance", err, workflow.ErrTerminal)
			wantNilInstance(t, "ReplaceState on a "+string(status)+" instance", got)
		}
		b.unchanged(t, "ReplaceState on a "+string(status)+" instance", snap)
	}
}

func testReplaceStateInvalidState(t *testing.T, h Harness) {
	b := setup(t, h)
	bad := workflow.State{Steps: map[string]*workflow.StepState{"a,b": {Status: workflow.StepPending}}}
	inst := b.create(t, store.CreateParams{State: counterState(0)})
	snap := b.snapshot(t, inst.ID)
	got, err := Replace(b.ctx, b.s, inst.ID, 0, bad, "bad")
	wantErrorIs(t, "ReplaceState with a bad step id", err, workflow.ErrInvalidState)
	wantNilInstance(t, "ReplaceState with a bad step id", got)
	b.unchanged(t, "ReplaceState with a bad step id", snap)

	// Apply validates the state before it writes: even a stale version
	// reports the invalid state.
	_, err = Replace(b.ctx, b.s, inst.ID, 5, bad, "bad")
	wantErrorIs(t, "ReplaceState with a bad state and a stale version", err, workflow.ErrInvalidState)
	unknownStatus := workflow.State{Steps: map[string]*workflow.StepState{"a": {Status: "done"}}}
	_, err = Replace(b.ctx, b.s, inst.ID, 0, unknownStatus, "bad")
	wantErrorIs(t, "ReplaceState with an unknown step status", err, workflow.ErrInvalidState)
	b.unchanged(t, "ReplaceState with invalid states", snap)
}
