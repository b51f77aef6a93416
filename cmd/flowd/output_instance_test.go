package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/workflow"
)

// flowd get shows a completed instance's output under its input, and no
// output line for an instance without one.
func TestPrintInstanceShowsTheOutput(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	inst := &workflow.Instance{
		ID: "race-1", Definition: "race", Status: workflow.StatusCompleted, Version: 3,
		CreatedAt: at, UpdatedAt: at, Input: json.RawMessage(`{}`),
		State: workflow.State{Steps: map[string]*workflow.StepState{
			"approve": {Status: workflow.StepCompleted, Output: json.RawMessage(`"yes"`)},
			"timeout": {Status: workflow.StepSkipped, Output: json.RawMessage(`null`)},
		}},
		Output: json.RawMessage(`{"approved":"yes","timed_out":null}`),
	}
	var b strings.Builder
	if err := printInstance(&b, inst); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "print-instance-output", b.String())
	inst.Output = nil
	b.Reset()
	if err := printInstance(&b, inst); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "output:") {
		t.Errorf("an instance without output shows an output line:\n%s", b.String())
	}
}
