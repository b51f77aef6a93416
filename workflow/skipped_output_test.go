package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A SKIPPED step's output is null for templates: the whole output renders
// null, a key inside it is missing (named in the error); steps that are
// neither COMPLETED nor SKIPPED have no output at all.
func TestStepOutputsOfSkippedSteps(t *testing.T) {
	steps := map[string]*StepState{
		"done":    {Status: StepCompleted, Output: json.RawMessage(`{"k":1}`)},
		"skipped": {Status: StepSkipped, Output: json.RawMessage(`{"stale":true}`)},
		"running": {Status: StepRunning},
	}
	outs := StepOutputs(steps)
	if string(outs["skipped"]) != "null" || string(outs["done"]) != `{"k":1}` {
		t.Errorf("outputs: %s", outs)
	}
	if _, ok := outs["running"]; ok {
		t.Error("a RUNNING step has an output")
	}
	has := func(id string) bool { return steps[id] != nil }
	whole, err := CompileTemplate(json.RawMessage(`{"a":"{{ .steps.skipped.output }}","b":"x{{ .steps.skipped.output }}"}`), has)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := whole.Render(nil, outs, 0); err != nil || string(got) != `{"a":null,"b":"xnull"}` {
		t.Errorf("render: %s, %v", got, err)
	}
	deep, err := CompileTemplate(json.RawMessage(`"{{ .steps.skipped.output.stale }}"`), has)
	if err != nil {
		t.Fatal(err)
	}
	_, err = deep.Render(nil, outs, 0)
	if !errors.Is(err, ErrMissingReference) || !strings.Contains(err.Error(), "{{ .steps.skipped.output.stale }}") {
		t.Errorf("a key inside a skipped step's output: %v, want a missing reference naming it", err)
	}
}
