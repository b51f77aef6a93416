package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Conformance of what a read of an instance shows of the attempts in
// flight: a claim leases task rows and writes no version, so the state
// as stored counts an attempt from the version that ends it, and so does
// Get, which writes are decided on; GetWithAttemptsInFlight shows the
// attempt each RUNNING step's leased task runs.

var inFlightTests = []conformanceTest{
	{"Get_attemptsInFlight", testGetAttemptsInFlight},
}

func testGetAttemptsInFlight(t *testing.T, h Harness) {
	b := setup(t, h)
	state := workflow.State{Steps: map[string]*workflow.StepState{
		"a": {Status: workflow.StepRunning, Attempts: 1},
		"e": {Status: workflow.StepRunning},
		"q": {Status: workflow.StepRunning},
	}}
	NewInstance(t, b.s, store.CreateParams{ID: "p", Status: workflow.StatusRunning, State: state})
	due := clockStart.Add(-time.Minute)
	a := withID("ta", newTask("p", "a", "q", due))
	a.Attempt = 1 // its second attempt is next
	e := withID("te", newTask("p", "e", "q", due))
	e.Iteration = 1 // an iteration's attempts are its own
	queued := withID("tq", newTask("p", "q", "q", clockStart.Add(time.Hour)))
	b.insertTasks(t, a, e, queued)
	before := b.get(t, "p")
	hist, err := b.s.History(b.ctx, "p", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	claimed, _, err := b.s.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q"}, Now: clockStart, Limit: 10, Owner: "w", Lease: time.Hour})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d tasks, %v; want ta and te", len(claimed), err)
	}
	got, err := b.s.GetWithAttemptsInFlight(b.ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != before.Version {
		t.Errorf("the claim wrote version %d of the instance, want it left at %d", got.Version, before.Version)
	}
	for step, want := range map[string]int{"a": 2, "e": 0, "q": 0} {
		if n := got.State.Steps[step].Attempts; n != want {
			t.Errorf("step %s shows %d attempts, want %d", step, n, want)
		}
	}
	// Get, what writes are decided on, has the state as stored.
	if diff := cmp.Diff(viewOf(before), viewOf(b.get(t, "p"))); diff != "" {
		t.Errorf("Get after the claim (-before +after):\n%s", diff)
	}
	if _, err := b.s.GetWithAttemptsInFlight(b.ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetWithAttemptsInFlight of an unknown id: %v, want ErrNotFound", err)
	}
	after, err := b.s.History(b.ctx, "p", 0, 0)
	if err != nil || len(after) != len(hist) {
		t.Errorf("history: %d entries after the claim (%v), want %d", len(after), err, len(hist))
	}
}
