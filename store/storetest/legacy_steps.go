package storetest

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LegacyStepStates are states as a database from before step records
// stores them, the steps inside the instance's row, by instance id: the
// stores' migration tests insert them (RUNNING, version 1) before
// migrating and check them with CheckLegacySteps.
func LegacyStepStates() map[string]string {
	return map[string]string{
		"chain": `{"steps":{"a":{"status":"COMPLETED","attempts":1,"output":{"n":12345678901234567890,"s":"h\u00e9llo <b>"}},` +
			`"b":{"status":"RUNNING","attempts":2,"error":"boom"},"c":{"status":"PENDING","attempts":0}},"variables":{"x":[1,2]},"sw":{"k":true}}`,
		"fanout": `{"steps":{"each":{"status":"RUNNING","attempts":0,"iterations":{"total":3,"completed":1,"failed":0,"running":2},` +
			`"foreach":{"total":3,"started":3,"completed":1,"outputs":{"0":"x"}}}},"variables":{}}`,
		"empty": `{"steps":{},"variables":{}}`,
	}
}

// CheckLegacySteps checks, through s, that every LegacyStepStates instance
// reads as it was stored, and that writes go on from it: a step changed,
// one dropped and one added by a replace, then read back.
func CheckLegacySteps(t *testing.T, s store.Backend) {
	t.Helper()
	ctx := t.Context()
	for id, raw := range LegacyStepStates() {
		var want workflow.State
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		inst, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s after the migration: %v", id, err)
		}
		checkSameState(t, id+" after the migration", inst.State, want)
	}
	inst, err := s.Get(ctx, "chain")
	if err != nil {
		t.Fatal(err)
	}
	next := inst.State.Clone()
	next.Steps["b"] = &workflow.StepState{Status: workflow.StepCompleted, Attempts: 2, Output: json.RawMessage(`{"ok":true}`)}
	delete(next.Steps, "c")
	next.Steps["d"] = &workflow.StepState{Status: workflow.StepPending}
	if _, err := Replace(ctx, s, "chain", inst.Version, next, "after the migration"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "chain")
	if err != nil {
		t.Fatal(err)
	}
	checkSameState(t, "chain written after the migration", got.State, next)
	if ids := slices.Sorted(maps.Keys(got.State.Steps)); !slices.Equal(ids, []string{"a", "b", "d"}) {
		t.Errorf("chain's steps after the write: %v, want [a b d]", ids)
	}
}

// checkSameState fails when got does not hold the values want does (a
// store may keep JSON normalised: members reordered, escapes written out).
func checkSameState(t *testing.T, what string, got, want workflow.State) {
	t.Helper()
	decode := func(s workflow.State) ([]byte, any) {
		b, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return b, v
	}
	g, gv := decode(got)
	w, wv := decode(want)
	if !reflect.DeepEqual(gv, wv) {
		t.Errorf("%s: state\n%s\nwant\n%s", what, g, w)
	}
}
