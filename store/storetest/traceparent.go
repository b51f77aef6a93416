package storetest

import (
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Trace context: the W3C traceparent an instance is created with is stored
// with it and read back wherever the engine reads the instance to run its
// steps, so every attempt, on any node, joins the workflow's trace.

var traceTests = []conformanceTest{
	{"TraceParent_stored", testTraceParentStored},
}

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// testTraceParentStored: Create (plain and in a group, with first tasks)
// keeps the traceparent; Get, Apply's result and a claim's read of the
// instance return it; an instance created without one has none.
func testTraceParentStored(t *testing.T, h Harness) {
	b := setup(t, h)
	created := b.create(t, store.CreateParams{ID: "traced", Status: workflow.StatusRunning, State: stepState(), TraceParent: testTraceParent,
		Tasks: []*store.Task{newTask("", "a", "q1", clockStart.Add(-time.Second))}})
	plain := b.create(t, store.CreateParams{ID: "plain", Status: workflow.StatusRunning, State: stepState(),
		Tasks: []*store.Task{newTask("", "a", "q1", clockStart.Add(-time.Second))}})
	grouped, _, err := b.s.ApplyGroup(b.ctx, []store.CreateParams{{ID: "grouped", Status: workflow.StatusRunning, State: stepState(), TraceParent: testTraceParent,
		Tasks: []*store.Task{newTask("", "a", "q2", clockStart.Add(-time.Second))}}}, nil, nil)
	if err != nil {
		t.Fatalf("ApplyGroup: %v", err)
	}
	for what, got := range map[string]string{
		"Create's result": created.TraceParent, "Get": b.get(t, "traced").TraceParent,
		"ApplyGroup's created": grouped[0].TraceParent, "Get of the group's": b.get(t, "grouped").TraceParent,
	} {
		if got != testTraceParent {
			t.Errorf("%s: traceparent %q, want %q", what, got, testTraceParent)
		}
	}
	if plain.TraceParent != "" || b.get(t, "plain").TraceParent != "" {
		t.Errorf("an instance created without a traceparent has %q", b.get(t, "plain").TraceParent)
	}
	inst := b.get(t, "traced")
	applied, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
		State: inst.State, Cause: "insert tasks", Insert: []*store.Task{newTask("traced", "b", "q3", clockStart)}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if applied.TraceParent != testTraceParent {
		t.Errorf("Apply's result: traceparent %q, want %q", applied.TraceParent, testTraceParent)
	}
	read := map[string]string{}
	claimed, _, err := b.engine(t).ClaimTasks(b.ctx, claimOf("node", []string{"q1", "q2"}, clockStart, 10))
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	for _, c := range claimed {
		read[c.Instance.ID] = c.Instance.TraceParent
	}
	want := map[string]string{"traced": testTraceParent, "grouped": testTraceParent, "plain": ""}
	for id, tp := range want {
		if got, ok := read[id]; !ok || got != tp {
			t.Errorf("claim read instance %s with traceparent %q (read: %v), want %q", id, got, ok, tp)
		}
	}
}
