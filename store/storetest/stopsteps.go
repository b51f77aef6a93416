package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A status that stops an instance (COMPLETED, CANCELLED, FAILED, TIMED_OUT)
// turns its RUNNING and WAITING steps CANCELLED in the same write, on every
// path that changes a status: Apply (a read-modify-write, a transition, the
// timeout the sweeper writes) and BatchUpdateStatus.
var stopStepsTests = []conformanceTest{
	{"StopSteps_modifyState", testStopStepsModifyState},
	{"StopSteps_transitionStatus", testStopStepsTransition},
	{"StopSteps_batchUpdateStatus", testStopStepsBatch},
	{"StopSteps_timeOutInstances", testStopStepsTimeout},
}

// stoppedAs is s as a change to status leaves it: with its RUNNING and
// WAITING steps CANCELLED when status stops steps.
func stoppedAs(s workflow.State, status workflow.Status) workflow.State {
	c := s.Clone()
	if status.StopsSteps() {
		c.CancelActiveSteps()
	}
	return c
}

// activeState has a step in each status, and keys the rule must keep.
func activeState(t testing.TB) workflow.State {
	t.Helper()
	s, err := workflow.ParseState([]byte(`{"variables":{"n":12345678901234567890},"region":"eu","steps":{
		"run":{"status":"RUNNING","attempts":2,"error":"attempt 1 failed","note":"kept"},
		"wait":{"status":"WAITING"},
		"pending":{},
		"done":{"status":"COMPLETED","output":{"ok":true},"attempts":1},
		"failed":{"status":"FAILED","error":"boom","attempts":3},
		"skipped":{"status":"SKIPPED"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// quietState has no RUNNING or WAITING step.
func quietState(t testing.TB) workflow.State {
	t.Helper()
	s, err := workflow.ParseState([]byte(`{"variables":{"x":1},"steps":{"a":{},"b":{"status":"COMPLETED","output":null}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantStopped checks that the instance and its newest history row show
// activeState with run and wait CANCELLED, and that the version before
// still shows them active: one write, one version, one history row.
func (b *bundle) wantStopped(t testing.TB, what string, id string, status workflow.Status) {
	t.Helper()
	want := activeState(t)
	want.CancelActiveSteps()
	inst := b.get(t, id)
	if inst.Status != status {
		t.Errorf("%s: status = %s, want %s", what, inst.Status, status)
	}
	assertState(t, what+": state", want, inst.State)
	h := b.history(t, id)
	for i, e := range h {
		if e.Version != int64(i) {
			t.Fatalf("%s: history versions are not 0…n: %d at %d", what, e.Version, i)
		}
	}
	last := h[len(h)-1]
	if last.Version != inst.Version || last.Status != status {
		t.Errorf("%s: last history row = version %d %s, want %d %s", what, last.Version, last.Status, inst.Version, status)
	}
	assertState(t, what+": last history state", want, last.State)
	if prev := h[len(h)-2].State; prev.Steps["run"].Status != workflow.StepRunning || prev.Steps["wait"].Status != workflow.StepWaiting {
		t.Errorf("%s: the version before the change already shows %s/%s", what, prev.Steps["run"].Status, prev.Steps["wait"].Status)
	}
}

// wantActive checks that a change to a status that does not stop steps left
// them as they were.
func (b *bundle) wantActive(t testing.TB, what string, id string) {
	t.Helper()
	assertState(t, what, activeState(t), b.get(t, id).State)
}

func testStopStepsModifyState(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, to := range workflow.StopStatuses {
		id := "m-" + string(to)
		b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: activeState(t)})
		if _, err := Modify(b.ctx, b.s, id, func(inst *workflow.Instance) error {
			inst.Status = to
			return nil
		}, "stop"); err != nil {
			t.Fatalf("ModifyState → %s: %v", to, err)
		}
		b.wantStopped(t, "ModifyState → "+string(to), id, to)
	}
	b.create(t, store.CreateParams{ID: "paused", Status: workflow.StatusRunning, State: activeState(t)})
	if _, err := Modify(b.ctx, b.s, "paused", func(inst *workflow.Instance) error {
		inst.Status = workflow.StatusPaused
		return nil
	}, "pause"); err != nil {
		t.Fatal(err)
	}
	b.wantActive(t, "ModifyState → PAUSED", "paused")
	// A FAILED instance whose state is rewritten without a status change
	// keeps what the function wrote: only the change of status stops steps.
	b.create(t, store.CreateParams{ID: "failed", Status: workflow.StatusFailed, State: workflow.State{}})
	if _, err := Modify(b.ctx, b.s, "failed", func(inst *workflow.Instance) error {
		inst.State = activeState(t)
		return nil
	}, "rewrite"); err != nil {
		t.Fatal(err)
	}
	b.wantActive(t, "ModifyState on a FAILED instance", "failed")
}

func testStopStepsTransition(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, tc := range []struct{ from, to workflow.Status }{
		{workflow.StatusRunning, workflow.StatusCancelled},
		{workflow.StatusRunning, workflow.StatusFailed},
		{workflow.StatusRunning, workflow.StatusTimedOut},
		{workflow.StatusRunning, workflow.StatusCompleted},
		{workflow.StatusPaused, workflow.StatusCancelled},
		{workflow.StatusPaused, workflow.StatusTimedOut},
	} {
		id := fmt.Sprintf("t-%s-%s", tc.from, tc.to)
		b.create(t, store.CreateParams{ID: id, Status: tc.from, State: activeState(t)})
		inst := b.transition(t, id, tc.from, tc.to)
		want := activeState(t)
		want.CancelActiveSteps()
		assertState(t, "TransitionStatus result", want, inst.State)
		b.wantStopped(t, fmt.Sprintf("TransitionStatus %s → %s", tc.from, tc.to), id, tc.to)
	}
	b.create(t, store.CreateParams{ID: "p", Status: workflow.StatusRunning, State: activeState(t)})
	b.transition(t, "p", workflow.StatusRunning, workflow.StatusPaused)
	b.wantActive(t, "TransitionStatus RUNNING → PAUSED", "p")
	// A state without active steps is left as it was.
	plain := quietState(t)
	b.create(t, store.CreateParams{ID: "plain", Status: workflow.StatusRunning, State: plain})
	b.transition(t, "plain", workflow.StatusRunning, workflow.StatusCancelled)
	assertState(t, "a state without active steps", plain, b.get(t, "plain").State)
}

func testStopStepsBatch(t *testing.T, h Harness) {
	b := setup(t, h)
	for _, to := range []workflow.Status{workflow.StatusCancelled, workflow.StatusFailed, workflow.StatusTimedOut, workflow.StatusCompleted} {
		ids := []string{"b-" + string(to) + "-1", "b-" + string(to) + "-2"}
		for _, id := range ids {
			b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: activeState(t)})
			b.transition(t, id, workflow.StatusRunning, workflow.StatusPaused)
		}
		// Earlier rounds' instances are stopped: each batch moves this
		// round's two only. The way back to RUNNING leaves steps alone.
		b.clock.Advance(time.Second)
		got, err := Batch(b.ctx, b.s, store.BatchStatusParams{
			Status: workflow.StatusPaused, UpdatedBefore: b.clock.Now(), NewStatus: workflow.StatusRunning, Limit: 100, Cause: "resume"})
		if err != nil || len(got) != 2 {
			t.Fatalf("batch PAUSED → RUNNING = %v, %v", got, err)
		}
		for _, id := range ids {
			b.wantActive(t, "batch PAUSED → RUNNING", id)
		}
		b.clock.Advance(time.Second)
		got, err = Batch(b.ctx, b.s, store.BatchStatusParams{
			Status: workflow.StatusRunning, UpdatedBefore: b.clock.Now(), NewStatus: to, Limit: 100, Cause: "stop"})
		if err != nil || len(got) != 2 {
			t.Fatalf("batch RUNNING → %s = %v, %v", to, got, err)
		}
		for _, id := range ids {
			b.wantStopped(t, "batch RUNNING → "+string(to), id, to)
		}
	}
}

func testStopStepsTimeout(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	past := clockStart.Add(-time.Minute)
	b.create(t, store.CreateParams{ID: "r", Status: workflow.StatusRunning, State: activeState(t), DefinitionRevision: 1, Deadline: &past})
	b.create(t, store.CreateParams{ID: "p", Status: workflow.StatusRunning, State: activeState(t), DefinitionRevision: 1, Deadline: &past})
	b.transition(t, "p", workflow.StatusRunning, workflow.StatusPaused)
	plain := quietState(t)
	b.create(t, store.CreateParams{ID: "plain", Status: workflow.StatusRunning, State: plain, DefinitionRevision: 1, Deadline: &past})
	items := b.due(t, eq, store.DueTimeouts, b.clock.Now(), 10)
	if len(items) != 3 {
		t.Fatalf("Due(timeouts) = %d items, want 3", len(items))
	}
	// The timeout as the sweeper writes it: the status alone, as read; the
	// store stops the steps.
	for _, it := range items {
		inst := it.Instance
		_, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
			Status: workflow.StatusTimedOut, State: inst.State, Deadline: inst.Deadline, Cause: "workflow timeout"})
		if err != nil {
			t.Fatalf("Apply of the timeout of %s: %v", inst.ID, err)
		}
	}
	b.wantStopped(t, "timeout of a RUNNING instance", "r", workflow.StatusTimedOut)
	b.wantStopped(t, "timeout of a PAUSED instance", "p", workflow.StatusTimedOut)
	assertState(t, "a state without active steps", plain, b.get(t, "plain").State)
}
