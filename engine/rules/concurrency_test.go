package rules

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/flowd/flowd/workflow"
)

func TestFreesSlot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to workflow.Status
		want     bool
	}{
		{workflow.StatusRunning, workflow.StatusCompleted, true},
		{workflow.StatusRunning, workflow.StatusFailed, true},
		{workflow.StatusRunning, workflow.StatusCancelled, true},
		{workflow.StatusRunning, workflow.StatusTimedOut, true},
		{workflow.StatusPaused, workflow.StatusCancelled, true},
		{workflow.StatusPaused, workflow.StatusTimedOut, true},
		// A pause keeps the slot, so a resume never exceeds the limit.
		{workflow.StatusRunning, workflow.StatusPaused, false},
		{workflow.StatusPaused, workflow.StatusRunning, false},
		{workflow.StatusRunning, workflow.StatusRunning, false},
		{workflow.StatusQueued, workflow.StatusCancelled, false},
		{workflow.StatusQueued, workflow.StatusRunning, false},
		{workflow.StatusFailed, workflow.StatusRunning, false},
	}
	for _, tc := range cases {
		if got := FreesSlot(tc.from, tc.to); got != tc.want {
			t.Errorf("FreesSlot(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestOverLimitAction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		strategy workflow.ConcurrencyStrategy
		running  bool
		want     OverLimit
	}{
		{"", true, OverLimitQueue},
		{workflow.ConcurrencyQueue, true, OverLimitQueue},
		{workflow.ConcurrencyCancelNewest, true, OverLimitCancel},
		{workflow.ConcurrencyCancelNewest, false, OverLimitCancel},
		{workflow.ConcurrencyCancelInProgress, true, OverLimitMakeRoom},
		// Only PAUSED holders: nothing RUNNING to cancel, the start queues.
		{workflow.ConcurrencyCancelInProgress, false, OverLimitQueue},
	}
	for _, tc := range cases {
		if got, err := OverLimitAction(tc.strategy, tc.running); err != nil || got != tc.want {
			t.Errorf("OverLimitAction(%q, running holder %v) = %v, %v; want %v", tc.strategy, tc.running, got, err, tc.want)
		}
	}
	if _, err := OverLimitAction("cancel_oldest", true); err == nil {
		t.Error("unknown strategy: no error")
	}
}

func TestPromote(t *testing.T) {
	t.Parallel()
	c := compileDef(t, "name: q\nconcurrency: {limit: 1}\nsteps:\n  - {id: a, type: task, handler: h}\n  - {id: b, type: task, handler: h, depends_on: [a]}")
	inst := &workflow.Instance{ID: "wf-1", Definition: "q", Status: workflow.StatusQueued, Input: json.RawMessage(`{}`), State: QueuedState(c, workflow.State{})}
	for id, s := range inst.State.Steps {
		if s.Status != workflow.StepPending {
			t.Fatalf("queued state: step %s is %s", id, s.Status)
		}
	}
	ch, err := testEnv().Promote(c, inst, t0)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Status != workflow.StatusRunning || ch.Cause != PromoteCause || ch.Settled != "" || len(ch.Insert) != 1 || ch.Insert[0].StepID != "a" || !ch.Notify {
		t.Errorf("promotion: status %s, cause %q, settled %q, %d tasks, notify %v", ch.Status, ch.Cause, ch.Settled, len(ch.Insert), ch.Notify)
	}
	// Only a QUEUED instance is promoted.
	_, err = testEnv().Promote(c, inst, t0)
	if !errors.Is(err, ErrActionNotAllowed) {
		t.Errorf("promoting a RUNNING instance: %v", err)
	}
}

func TestPromoteFailingAtOnce(t *testing.T) {
	t.Parallel()
	c := compileDef(t, "name: q\nconcurrency: {limit: 1}\nsteps:\n  - {id: a, type: task, handler: h, input: {x: '{{ .input.missing }}'}}")
	inst := &workflow.Instance{ID: "wf-1", Definition: "q", Status: workflow.StatusQueued, Input: json.RawMessage(`{}`), State: QueuedState(c, workflow.State{})}
	ch, err := testEnv().Promote(c, inst, t0)
	if err != nil {
		t.Fatal(err)
	}
	// QUEUED → FAILED is no transition: RUNNING, then FAILED, in one write.
	if ch.Status != workflow.StatusRunning || ch.Settled != workflow.StatusFailed || ch.SettledCause == "" || len(ch.Insert) != 0 {
		t.Errorf("promotion that fails at once: status %s, settled %s (%q), %d tasks", ch.Status, ch.Settled, ch.SettledCause, len(ch.Insert))
	}
	if !workflow.CanTransition(workflow.StatusQueued, ch.Status) || !workflow.CanTransition(ch.Status, ch.Settled) {
		t.Error("the promotion's versions are not transitions of the table")
	}
}
