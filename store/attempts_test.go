package store_test

import (
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A RUNNING step shows the attempt its leased task runs; a step that
// counts more already, or that no longer runs, keeps its count.
func TestShowAttemptsInFlight(t *testing.T) {
	st := workflow.State{Steps: map[string]*workflow.StepState{
		"first":   {Status: workflow.StepRunning},
		"retried": {Status: workflow.StepRunning, Attempts: 2},
		"ahead":   {Status: workflow.StepRunning, Attempts: 3},
		"done":    {Status: workflow.StepCompleted, Attempts: 1},
	}}
	store.ShowAttemptsInFlight(&st, map[string]int{"first": 1, "retried": 3, "ahead": 2, "done": 4, "unknown": 1})
	want := map[string]int{"first": 1, "retried": 3, "ahead": 3, "done": 1}
	for id, n := range want {
		if got := st.Steps[id].Attempts; got != n {
			t.Errorf("step %s: %d attempts, want %d", id, got, n)
		}
	}
	if len(st.Steps) != len(want) {
		t.Errorf("steps %v: a task of an unknown step added one", st.Steps)
	}
}
