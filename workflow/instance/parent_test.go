package instance

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestStepChildRoundTrips(t *testing.T) {
	var st StepState
	if st.Child() != "" {
		t.Fatal("a new step names a child")
	}
	st.SetChild("kid-1")
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back StepState
	if err := json.Unmarshal(b, &back); err != nil || back.Child() != "kid-1" {
		t.Fatalf("decoded child %q, %v (from %s)", back.Child(), err, b)
	}
	// A child key that is not a string names no child.
	odd := StepState{Extra: map[string]json.RawMessage{"child": json.RawMessage(`42`)}}
	if odd.Child() != "" {
		t.Fatalf("child from a number: %q", odd.Child())
	}
	var none *StepState
	if none.Child() != "" {
		t.Fatal("a nil step names a child")
	}
}

func TestParentRefValidate(t *testing.T) {
	one, neg := 1, -1
	for _, ok := range []*ParentRef{nil, {WorkflowID: "w", Step: "s"}, {WorkflowID: "w", Step: "s", Index: &one}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []*ParentRef{{WorkflowID: "", Step: "s"}, {WorkflowID: "a b", Step: "s"}, {WorkflowID: "w"}, {WorkflowID: "w", Step: "s", Index: &neg}} {
		err := bad.Validate()
		if !errors.Is(err, ErrInvalidID) && !errors.Is(err, ErrInvalidState) {
			t.Errorf("%+v: %v, want an invalid id or state", bad, err)
		}
	}
}
