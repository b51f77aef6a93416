package store_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

func TestSplitStatePutsTheChangedStepsAndDropsTheRemovedOnes(t *testing.T) {
	prior := workflow.State{
		Variables: map[string]json.RawMessage{"v": json.RawMessage(`1`)},
		Steps: map[string]*workflow.StepState{
			"a": {Status: workflow.StepCompleted, Attempts: 1, Output: json.RawMessage(`{"x":1}`)},
			"b": {Status: workflow.StepRunning, Attempts: 1},
			"c": {Status: workflow.StepPending},
			"d": {Status: workflow.StepPending, Extra: map[string]json.RawMessage{"iterations": json.RawMessage(`{"total":2}`)}},
		},
	}
	next := prior.Clone()
	next.Steps["b"].Status, next.Steps["b"].Output = workflow.StepCompleted, json.RawMessage(`"done"`)
	next.Steps["d"].Extra["iterations"] = json.RawMessage(`{"total":3}`)
	delete(next.Steps, "c")
	next.Steps["e"] = &workflow.StepState{Status: workflow.StepPending}

	sr, err := store.SplitState(&prior, next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sr.IDs, []string{"b", "d", "e"}) || !slices.Equal(sr.Drop, []string{"c"}) || sr.All {
		t.Errorf("puts %v, drops %v, all %v; want [b d e], [c], false", sr.IDs, sr.Drop, sr.All)
	}
	if !slices.Equal(sr.Existing, []bool{true, true, false}) {
		t.Errorf("existing %v, want b and d replaced, e inserted", sr.Existing)
	}
	if got := string(sr.Records[0]); got != `{"attempts":1,"output":"done","status":"COMPLETED"}` {
		t.Errorf("b's record %s", got)
	}
	if got := string(sr.Header); got != `{"steps":{},"variables":{"v":1}}` {
		t.Errorf("header %s, want the state without its steps' records", got)
	}

	same, err := store.SplitState(&next, next.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if len(same.IDs) != 0 || len(same.Drop) != 0 {
		t.Errorf("an unchanged state puts %v and drops %v", same.IDs, same.Drop)
	}

	// Without the state it moves from, a write puts every record and
	// replaces whatever is stored.
	all, err := store.SplitState(nil, next)
	if err != nil {
		t.Fatal(err)
	}
	if !all.All || !slices.Equal(all.IDs, []string{"a", "b", "d", "e"}) || len(all.Drop) != 0 || slices.Contains(all.Existing, true) {
		t.Errorf("with no prior: puts %v, drops %v, all %v", all.IDs, all.Drop, all.All)
	}
}

func TestSplitStateRefusesAStateThatDoesNotEncode(t *testing.T) {
	next := workflow.State{Steps: map[string]*workflow.StepState{"a": {Status: workflow.StepCompleted, Output: json.RawMessage(`{`)}}}
	if _, err := store.SplitState(nil, next); err == nil {
		t.Fatal("a step whose output is not JSON was split")
	}
}
