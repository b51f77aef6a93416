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
			`"foreach":{"total":3,"started":3,"completed":1}}},"variables":{}}`,
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

// LegacyForeachState is a foreach step in flight as a database from before
// iteration outputs are stored on their task rows keeps it: the outputs of
// its completed iterations (0 and 2 of 4) in its bookkeeping. The stores'
// migration tests insert it as instance "fanout" (RUNNING, version 1) with
// LegacyForeachTasks, migrate, and check with CheckLegacyForeach.
const LegacyForeachState = `{"steps":{"each":{"status":"RUNNING","attempts":1,` +
	`"iterations":{"total":4,"completed":2,"failed":0,"running":2},` +
	`"foreach":{"total":4,"started":4,"completed":2,"outputs":{"0":{"n":1},"2":"two"}}}},"variables":{}}`

// LegacyForeachTasks are the task rows of LegacyForeachState's iterations:
// id, iteration and status.
func LegacyForeachTasks() []LegacyHeldTask {
	return []LegacyHeldTask{
		{ID: "it1", InstanceID: "fanout", Queue: "q", Status: store.TaskDone},
		{ID: "it2", InstanceID: "fanout", Queue: "q", Status: store.TaskQueued},
		{ID: "it3", InstanceID: "fanout", Queue: "q", Status: store.TaskDone},
		{ID: "it4", InstanceID: "fanout", Queue: "q", Status: store.TaskLeased},
	}
}

// CheckLegacyForeach checks, through s, that the outputs of
// LegacyForeachState's completed iterations are on their task rows and no
// longer in the step's record.
func CheckLegacyForeach(t *testing.T, s store.Backend) {
	t.Helper()
	ctx := t.Context()
	tasks, err := s.TasksOfInstance(ctx, "fanout")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"it1": `{"n":1}`, "it2": "", "it3": `"two"`, "it4": ""}
	for _, task := range tasks {
		if got := string(task.Output); got != want[task.ID] {
			t.Errorf("task %s (iteration %d) output %q, want %q", task.ID, task.Iteration, got, want[task.ID])
		}
	}
	if len(tasks) != len(want) {
		t.Errorf("%d tasks, want %d", len(tasks), len(want))
	}
	inst, err := s.Get(ctx, "fanout")
	if err != nil {
		t.Fatal(err)
	}
	var fe map[string]json.RawMessage
	if err := json.Unmarshal(inst.State.Steps["each"].Extra["foreach"], &fe); err != nil {
		t.Fatalf("the step's bookkeeping: %v", err)
	}
	if _, ok := fe["outputs"]; ok || string(fe["completed"]) != "2" {
		t.Errorf("the step's bookkeeping after the migration: %s", inst.State.Steps["each"].Extra["foreach"])
	}
}
