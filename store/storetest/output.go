package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The instance's output: written by the Apply that completes it, stored and
// returned by every read; no other write sets it.

var outputTests = []conformanceTest{
	{"Output_writtenWithCompleted", testOutputWrittenWithCompleted},
	{"Output_settled", testOutputSettled},
	{"Output_invalid", testOutputInvalid},
}

// completing is the write that completes inst (RUNNING) with output.
func completing(inst *workflow.Instance, output string, now time.Time) *store.Write {
	st := inst.State.Clone()
	return &store.Write{
		ID: inst.ID, ExpectedVersion: inst.Version, From: workflow.StatusRunning,
		Status: workflow.StatusCompleted, State: st, Cause: "complete", Now: now,
		Output: json.RawMessage(output),
	}
}

func testOutputWrittenWithCompleted(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.running(t, "out")
	other := b.running(t, "plain")
	if inst.Output != nil {
		t.Fatalf("a running instance has output %s", inst.Output)
	}
	now := b.clock.Advance(time.Second)
	got, err := b.s.Apply(b.ctx, completing(inst, `{"total":3,"big":12345678901234567890}`, now))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	const want = `{"big":12345678901234567890,"total":3}`
	if got.Status != workflow.StatusCompleted || !sameJSON(got.Output, want) {
		t.Errorf("Apply returned status %s, output %s; want COMPLETED, %s", got.Status, got.Output, want)
	}
	if stored := b.get(t, inst.ID); !sameJSON(stored.Output, want) {
		t.Errorf("stored output %s, want %s", stored.Output, want)
	}
	page, err := b.s.List(b.ctx, store.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, i := range page.Instances {
		switch i.ID {
		case inst.ID:
			seen++
			if !sameJSON(i.Output, want) {
				t.Errorf("listed output %s, want %s", i.Output, want)
			}
		case other.ID:
			seen++
			if i.Output != nil {
				t.Errorf("an instance without output lists %s", i.Output)
			}
		}
	}
	if seen != 2 {
		t.Errorf("the list holds %d of the 2 instances", seen)
	}
	// A write without output leaves an instance without one.
	w := completing(other, "", now)
	w.Output = nil
	if got, err := b.s.Apply(b.ctx, w); err != nil || got.Output != nil || b.get(t, other.ID).Output != nil {
		t.Errorf("completion without output: %v, %v", got, err)
	}
}

// An instance that completes as the settled version of a resume gets its
// output in the same write.
func testOutputSettled(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.running(t, "out")
	inst = b.transition(t, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
	now := b.clock.Advance(time.Second)
	w := &store.Write{
		ID: inst.ID, ExpectedVersion: inst.Version, From: workflow.StatusPaused,
		Status: workflow.StatusRunning, State: inst.State.Clone(), Cause: "resume",
		Settled: workflow.StatusCompleted, SettledCause: "COMPLETED after resume", Now: now,
		Output: json.RawMessage(`null`),
	}
	got, err := b.s.Apply(b.ctx, w)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// A JSON null output is an output: present, and null.
	if string(got.Output) != "null" || string(b.get(t, inst.ID).Output) != "null" {
		t.Errorf("output returned %q, stored %q; want null", got.Output, b.get(t, inst.ID).Output)
	}
}

func testOutputInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.running(t, "out")
	now := b.clock.Advance(time.Second)
	notCompleting := completing(inst, `1`, now)
	notCompleting.Status = workflow.StatusRunning
	notJSON := completing(inst, `{`, now)
	tasksOnly := &store.Write{ID: inst.ID, TasksOnly: true, Output: json.RawMessage(`1`), Now: now,
		Update: []store.TaskWrite{{Task: &store.Task{ID: "x", InstanceID: inst.ID}, Guard: store.TaskGuard{Status: store.TaskQueued}}}}
	for name, w := range map[string]*store.Write{"output without COMPLETED": notCompleting, "output not JSON": notJSON, "tasks-only with output": tasksOnly} {
		if _, err := b.s.Apply(b.ctx, w); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := b.get(t, inst.ID); got.Version != inst.Version || got.Output != nil {
		t.Errorf("a refused write changed the instance: version %d, output %s", got.Version, got.Output)
	}
}

// sameJSON reports whether got is the JSON value want (whitespace and key
// order aside; numbers compared by their text).
func sameJSON(got json.RawMessage, want string) bool {
	var a, c any
	da := json.NewDecoder(bytes.NewReader(got))
	da.UseNumber()
	dc := json.NewDecoder(bytes.NewReader([]byte(want)))
	dc.UseNumber()
	if da.Decode(&a) != nil || dc.Decode(&c) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jc, _ := json.Marshal(c)
	return string(ja) == string(jc)
}
