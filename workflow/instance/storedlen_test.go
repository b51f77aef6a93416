package instance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// An edit's End is the length of the stored form of the state as changed,
// whatever the change of the records it names and of the header: records
// put, replaced, deleted and set to null, variables and extra members
// set and removed, escapes in keys and values, from no steps and to none.
func TestEditEndIsTheStoredLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "c<d>", "é", "s#2", "x\u2028"}
	values := []string{`1`, `"x"`, `{"k":[1,2,{"<":"&"}]}`, `null`, `"\u00e9 <b>"`, `[]`}
	record := func() *StepState {
		if rng.IntN(8) == 0 {
			return nil
		}
		st := &StepState{Status: StepCompleted, Attempts: rng.IntN(3)}
		switch rng.IntN(3) {
		case 0:
			st.Output = json.RawMessage(values[rng.IntN(len(values))])
		case 1:
			st.Status, st.Error = StepFailed, "it <failed> \"badly\""
		}
		if rng.IntN(2) == 0 {
			st.Extra = map[string]json.RawMessage{"seq": json.RawMessage(fmt.Sprint(rng.IntN(1000))), "kind": json.RawMessage(`"step"`)}
		}
		return st
	}
	for i := range 2000 {
		s := State{Steps: map[string]*StepState{}}
		for _, id := range ids {
			if rng.IntN(2) == 0 {
				s.Steps[id] = record()
			}
		}
		if rng.IntN(2) == 0 {
			s.Variables = map[string]json.RawMessage{"v": json.RawMessage(values[rng.IntN(len(values))])}
		}
		if rng.IntN(2) == 0 {
			s.Extra = map[string]json.RawMessage{"code": json.RawMessage(`{"run":1,"seq":3}`)}
		}
		before, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, id := range ids {
			if rng.IntN(3) == 0 {
				names = append(names, id)
			}
		}
		e := BeginEdit(&s, len(before), names...)
		for _, id := range names {
			if rng.IntN(4) == 0 {
				delete(s.Steps, id)
			} else {
				s.Steps[id] = record()
			}
		}
		switch rng.IntN(4) {
		case 0:
			if s.Variables == nil {
				s.Variables = map[string]json.RawMessage{}
			}
			s.Variables["w<"] = json.RawMessage(`{"a":"&"}`)
		case 1:
			s.Extra = map[string]json.RawMessage{"code": json.RawMessage(`{"run":12,"seq":345,"waiting":["x"]}`)}
		case 2:
			s.Variables = nil
		}
		after, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got := e.End(); got != len(after) {
			t.Fatalf("case %d: End() = %d, want %d\nbefore %s\nafter  %s\nedited %q", i, got, len(after), before, after, names)
		}
	}
	// Not known before: not known after.
	s := State{}
	e := BeginEdit(&s, 0, "a")
	s.Steps = map[string]*StepState{"a": {Status: StepCompleted}}
	if got := e.End(); got != 0 {
		t.Errorf("End() of an edit of a state of unknown length = %d, want 0", got)
	}
}
