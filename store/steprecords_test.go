package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/jsondelta"
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

	sr, err := store.SplitState(&prior, next, nil)
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

	same, err := store.SplitState(&next, next.Clone(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(same.IDs) != 0 || len(same.Drop) != 0 {
		t.Errorf("an unchanged state puts %v and drops %v", same.IDs, same.Drop)
	}

	// Without the state it moves from, a write puts every record and
	// replaces whatever is stored.
	all, err := store.SplitState(nil, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !all.All || !slices.Equal(all.IDs, []string{"a", "b", "d", "e"}) || len(all.Drop) != 0 || slices.Contains(all.Existing, true) {
		t.Errorf("with no prior: puts %v, drops %v, all %v", all.IDs, all.Drop, all.All)
	}
}

func TestSplitStateRefusesAStateThatDoesNotEncode(t *testing.T) {
	next := workflow.State{Steps: map[string]*workflow.StepState{"a": {Status: workflow.StepCompleted, Output: json.RawMessage(`{`)}}}
	if _, err := store.SplitState(nil, next, nil); err == nil {
		t.Fatal("a step whose output is not JSON was split")
	}
}

// A history patch made from what a write changed turns the previous
// version's encoding into the new one's byte for byte, whatever changed:
// header members set, replaced and deleted, steps added, changed and
// dropped, outputs written differently from how they are stored.
func TestHistoryPatchReproducesTheNewState(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 7))
	value := func() json.RawMessage {
		switch r.IntN(5) {
		case 0:
			return json.RawMessage(`null`)
		case 1:
			return json.RawMessage(fmt.Sprintf(`{ "n": %d, "h": "<&>" }`, r.IntN(9)))
		case 2:
			return json.RawMessage(fmt.Sprintf(`[%d,"x"]`, r.IntN(9)))
		default:
			return json.RawMessage(fmt.Sprintf(`"s%d"`, r.IntN(9)))
		}
	}
	statuses := []workflow.StepStatus{workflow.StepPending, workflow.StepRunning, workflow.StepCompleted, workflow.StepFailed}
	change := func(s *workflow.State) {
		for range 1 + r.IntN(4) {
			k := fmt.Sprintf("k%d", r.IntN(6))
			switch r.IntN(6) {
			case 0:
				delete(s.Variables, k)
			case 1:
				if s.Extra == nil {
					s.Extra = map[string]json.RawMessage{}
				}
				s.Extra["x"+k] = value()
			case 2:
				delete(s.Steps, k)
			case 3, 4:
				st := &workflow.StepState{Status: statuses[r.IntN(len(statuses))], Attempts: r.IntN(3)}
				if r.IntN(2) == 0 {
					st.Output = value()
				}
				if r.IntN(4) == 0 {
					st.Error = "e<" + k
				}
				s.Steps[k] = st
			default:
				s.Variables[k] = value()
			}
		}
	}
	prior := workflow.State{Variables: map[string]json.RawMessage{}, Steps: map[string]*workflow.StepState{}}
	for i := range 500 {
		next := prior.Clone()
		change(&next)
		patch, ok, err := store.HistoryPatch(&prior, &next, nil)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		old, err := prior.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := next.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("write %d: no patch from %s to %s", i, old, want)
		}
		got, err := jsondelta.Apply(old, patch, jsondelta.Bytewise)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("write %d: applying %s to %s gives %s, %v; want %s", i, patch, old, got, err, want)
		}
		prior = next
	}
}

// The patch holds the records that changed, not the others: its size is
// the write's.
func TestHistoryPatchHoldsOnlyTheChange(t *testing.T) {
	prior := workflow.State{Steps: map[string]*workflow.StepState{}}
	for i := range 200 {
		prior.Steps[fmt.Sprintf("s%03d", i)] = &workflow.StepState{Status: workflow.StepCompleted, Output: json.RawMessage(`"` + strings.Repeat("o", 100) + `"`)}
	}
	next := prior.Clone()
	next.Steps["s200"] = &workflow.StepState{Status: workflow.StepRunning, Attempts: 1}
	patch, ok, err := store.HistoryPatch(&prior, &next, nil)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if want := `{"m":{"steps":{"s":{"s200":{"attempts":1,"status":"RUNNING"}}}}}`; string(patch) != want {
		t.Errorf("patch %s, want %s", patch, want)
	}
}
