package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The expressions of one decision share one decoded document: it is
// decoded when the first needs it, under the gate's weight, and only what
// the decision changed is decoded again.
func TestExprDocDecodesOnce(t *testing.T) {
	t.Parallel()
	g := NewDocGate(1 << 10) // a pool of 16 KiB, 12 KiB first come, first served
	input := json.RawMessage(`{"xs":[` + strings.TrimSuffix(strings.Repeat(`{"a":1},`, 100), ",") + `]}`)
	state := State{
		Variables: map[string]json.RawMessage{"v": json.RawMessage(`{"k":[1,2]}`)},
		Steps: map[string]*StepState{
			"a": {Status: StepCompleted, Output: json.RawMessage(`{"n":1}`)},
			"b": {Status: StepPending},
		},
	}
	d := NewExprDoc(context.Background(), g)
	first, err := d.Document(input, state)
	if err != nil {
		t.Fatal(err)
	}
	// The document weighs more than the pool: it holds all of it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, 2<<10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("another document got its weight while the first held the pool: %v", err)
	}

	// The decision skips b: its status and output change, the rest is the
	// same text.
	state.Steps["b"] = &StepState{Status: StepSkipped, Output: json.RawMessage("null")}
	second, err := d.Document(input, state)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	if !same(first["input"], second["input"]) {
		t.Error("the input was decoded twice")
	}
	if !same(first["variables"].(map[string]any)["v"], second["variables"].(map[string]any)["v"]) {
		t.Error("a variable was decoded twice")
	}
	outA := func(doc map[string]any) any { return doc["steps"].(map[string]any)["a"].(map[string]any)["output"] }
	if !same(outA(first), outA(second)) {
		t.Error("a step output was decoded twice")
	}
	if got := second["steps"].(map[string]any)["b"]; !reflect.DeepEqual(got, map[string]any{"status": "SKIPPED", "output": nil}) {
		t.Errorf("steps.b = %v, want what the decision made of it", got)
	}
	if got := first["steps"].(map[string]any)["b"]; !reflect.DeepEqual(got, map[string]any{"status": "PENDING", "output": nil}) {
		t.Errorf("steps.b of the first document = %v: changed by the second", got)
	}
	// A new output (other bytes) is decoded anew.
	state.Steps["a"] = &StepState{Status: StepCompleted, Output: json.RawMessage(`{"n":2}`)}
	third, err := d.Document(input, state)
	if err != nil {
		t.Fatal(err)
	}
	if n := outA(third).(map[string]any)["n"]; n != json.Number("2") {
		t.Errorf("steps.a.output.n = %v after the output changed", n)
	}

	d.Close()
	d.Close() // gives nothing back twice
	r := mustAcquire(t, g, g.largePool)
	if more, err := g.Acquire(ctx, 1<<10); err == nil {
		more()
		t.Fatal("Close gave back more than the document took")
	}
	r()
	// A document used after Close weighs again.
	if _, err := d.Document(input, state); err != nil {
		t.Fatal(err)
	}
	d.Close()
	mustAcquire(t, g, g.largePool)()
}

func TestExprDocWaitEnds(t *testing.T) {
	t.Parallel()
	g := NewDocGate(1 << 10)
	hold := mustAcquire(t, g, g.largePool)
	defer hold()
	ctx, cancel := context.WithCancel(context.Background())
	d := NewExprDoc(ctx, g)
	defer d.Close()
	done := make(chan error, 1)
	big := json.RawMessage(`{"s":"` + strings.Repeat("x", 100<<10) + `"}`)
	go func() {
		_, err := d.Document(big, State{})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("decoded while the pool was taken: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for the memory to decode the instance's document (about 102753 bytes)") {
		t.Fatalf("error %v", err)
	}
}

func TestExprDocRefusesWhatDoesNotDecode(t *testing.T) {
	t.Parallel()
	d := NewExprDoc(context.Background(), NewDocGate(0))
	defer d.Close()
	_, err := d.Document(json.RawMessage(`{}`), State{Steps: map[string]*StepState{"a": {Status: StepCompleted, Output: json.RawMessage(`{"x":`)}}})
	if err == nil || !strings.HasPrefix(err.Error(), "steps.a.output: ") {
		t.Fatalf("error %v, want one naming steps.a.output", err)
	}
}
