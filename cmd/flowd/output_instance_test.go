package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
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

// flowd get lists a code workflow's entries in the order they were
// recorded (seq), not by name, and a timed-out wait's error object by its
// type and message.
func TestPrintInstanceListsCodeStepsInRecordOrder(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	entry := func(status workflow.StepStatus, seq int, extra string) *workflow.StepState {
		st := &workflow.StepState{Status: status, Attempts: 1, Output: json.RawMessage(`1`), Extra: map[string]json.RawMessage{"seq": json.RawMessage(strconv.Itoa(seq))}}
		if extra != "" {
			st.Output = nil
			st.Extra["error"] = json.RawMessage(extra)
		}
		return st
	}
	inst := &workflow.Instance{
		ID: "c-1", Definition: "order", Status: workflow.StatusRunning, Version: 4, CreatedAt: at, UpdatedAt: at,
		Input: json.RawMessage(`{}`),
		State: workflow.State{Steps: map[string]*workflow.StepState{
			"zeta":  entry(workflow.StepCompleted, 1, ""),
			"alpha": entry(workflow.StepCompleted, 2, ""),
			"paid":  entry(workflow.StepFailed, 3, `{"type":"timeout","message":"no event \"payment\" came within 1h0m0s"}`),
			"nap": {Status: workflow.StepWaiting, Extra: map[string]json.RawMessage{
				"seq": json.RawMessage(`4`), "until": json.RawMessage(`"2026-12-07T11:00:00Z"`)}},
		}},
	}
	var b strings.Builder
	if err := printInstance(&b, inst); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	z, a, p := strings.Index(out, "zeta"), strings.Index(out, "alpha"), strings.Index(out, "paid")
	if z < 0 || a < z || p < a {
		t.Errorf("entries not in seq order (zeta, alpha, paid):\n%s", out)
	}
	if !strings.Contains(out, "until 2026-12-07T11:00:00Z") {
		t.Errorf("the sleep's end is not shown:\n%s", out)
	}
	if !strings.Contains(out, `error: timeout: no event "payment" came within 1h0m0s`) {
		t.Errorf("the timed-out wait's error is not shown:\n%s", out)
	}
}

// flowd def get writes a code definition as it can be applied again: its
// code and the retry of its runs, no steps.
func TestPrintCodeDefinition(t *testing.T) {
	def, err := workflow.ParseDefinition([]byte("name: order\ncode: {handler: order}\nretry: {max_attempts: 5, initial_backoff: 2s}\ntimeout: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printDefinition(&b, &api.DefinitionInfo{Name: "order", Revision: 2, Definition: raw}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "code: {handler: order}\nretry: {max_attempts: 5, initial_backoff: 2s}\n") || strings.Contains(out, "steps:") {
		t.Errorf("flowd def get of a code definition:\n%s", out)
	}
	i := strings.Index(out, "\n")
	again, err := workflow.ParseDefinition([]byte(out[i+1:]))
	if err != nil || again.Code == nil || again.Code.Handler != "order" || again.Retry.MaxAttempts != 5 {
		t.Errorf("the printed definition does not read back: %+v, %v", again, err)
	}
}
