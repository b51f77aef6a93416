package rules

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const parentDef = `
name: parent
steps:
  - {id: sub, type: workflow, definition: kid, input: {sku: "{{ .input.sku }}"}, timeout: 1m, retry: {max_attempts: 2, initial_backoff: 1s}}
  - {id: after, type: task, handler: h, depends_on: [sub], input: "{{ .steps.sub.output }}"}
`

// startChild delivers sub's task and records child as the attempt's.
func (w *world) startChild(child string) Change {
	w.t.Helper()
	task := w.deliver("sub")
	ch, err := w.env.StartChild(w.inst, task, task.Lease, child, w.now)
	if err != nil {
		w.t.Fatalf("starting child %s: %v", child, err)
	}
	w.apply(ch)
	return ch
}

func TestWorkflowStepIsQueuedForTheEngineWithTheChildsInput(t *testing.T) {
	w := started(t, parentDef, `{"sku": "A-1"}`)
	task := w.tasks["sub"]
	if task == nil || task.Queue != store.QueueChild || task.Status != store.TaskQueued || string(task.Input) != `{"sku":"A-1"}` || task.MaxAttempts != 2 {
		t.Fatalf("sub's task: %+v", task)
	}
	w.wantSteps(map[string]workflow.StepStatus{"sub": workflow.StepRunning, "after": workflow.StepPending})
}

func TestStartChildRecordsTheChildAndHoldsTheLeaseUntilTheTimeout(t *testing.T) {
	w := started(t, parentDef, `{"sku": "A-1"}`)
	ch := w.startChild("kid-1")
	if w.step("sub").Child() != "kid-1" || ch.Cause != `step "sub" started child workflow kid-1 (attempt 1)` {
		t.Fatalf("child %q, cause %q", w.step("sub").Child(), ch.Cause)
	}
	task := w.tasks["sub"]
	if task.Status != store.TaskLeased || !task.LeaseUntil.Equal(t0.Add(time.Minute)) || ch.Update[0].Guard.Lease == "" {
		t.Fatalf("sub's task after the start: %+v", task)
	}
	// Without a timeout the lease outlives any child.
	w2 := started(t, "name: p\nsteps:\n  - {id: sub, type: workflow, definition: kid}\n", `{}`)
	w2.startChild("kid-2")
	if until := w2.tasks["sub"].LeaseUntil; until.Before(t0.Add(50 * 365 * 24 * time.Hour)) {
		t.Fatalf("lease until %v", until)
	}
	// A stale lease starts nothing.
	if _, err := w.env.StartChild(w.inst, task, "other", "kid-3", w.now); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("start under another lease: %v", err)
	}
}

func TestCompletedChildCompletesTheStepOnce(t *testing.T) {
	w := started(t, parentDef, `{"sku": "A-1"}`)
	w.startChild("kid-1")
	task := w.tasks["sub"]
	ch, ok, err := w.env.ChildFinished(w.c, w.inst, task, "kid-1", workflow.StatusCompleted, json.RawMessage(`{"total":3}`), w.now)
	if err != nil || !ok || ch.Update[0].Guard != store.GuardOf(task) {
		t.Fatalf("ChildFinished: ok %v, %v, %+v", ok, err, ch.Update)
	}
	w.apply(ch)
	w.wantSteps(map[string]workflow.StepStatus{"sub": workflow.StepCompleted, "after": workflow.StepRunning})
	if string(w.step("sub").Output) != `{"total":3}` || string(w.tasks["after"].Input) != `{"total":3}` {
		t.Fatalf("sub output %s, after's input %s", w.step("sub").Output, w.tasks["after"].Input)
	}
	// The same outcome again: the step no longer waits.
	if _, ok, err := w.env.ChildFinished(w.c, w.inst, w.tasks["sub"], "kid-1", workflow.StatusCompleted, nil, w.now); ok || err != nil {
		t.Fatalf("second delivery: ok %v, %v", ok, err)
	}
}

func TestFailedChildFailsTheAttemptAndTheRetryWaitsForANewChild(t *testing.T) {
	for _, status := range []workflow.Status{workflow.StatusFailed, workflow.StatusTimedOut, workflow.StatusCancelled} {
		w := started(t, parentDef, `{"sku": "A-1"}`)
		w.startChild("kid-1")
		ch, ok, err := w.env.ChildFinished(w.c, w.inst, w.tasks["sub"], "kid-1", status, nil, w.now)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v, %v", status, ok, err)
		}
		w.apply(ch)
		task := w.tasks["sub"]
		if task.Status != store.TaskQueued || !task.RunAt.After(t0) || w.step("sub").Status != workflow.StepRunning ||
			!strings.Contains(w.step("sub").Error, "child workflow kid-1 is "+string(status)) {
			t.Fatalf("%s: task %+v, step %+v", status, task, w.step("sub"))
		}
		if got := w.step("sub").Child(); got != "" {
			t.Fatalf("%s: between attempts the step still names child %q", status, got)
		}
		// Delivered again, before the new attempt has started its child:
		// the old child's outcome (a sweep finding it) is not this
		// attempt's.
		next := w.deliver("sub")
		if _, ok, _ := w.env.ChildFinished(w.c, w.inst, next, "kid-1", status, nil, w.now); ok {
			t.Fatalf("%s: the first child's outcome failed the second attempt before it started a child", status)
		}
		ch, err = w.env.StartChild(w.inst, next, next.Lease, "kid-2", w.now)
		if err != nil {
			t.Fatal(err)
		}
		w.apply(ch)
		// The old child's outcome reaches nobody now; the next attempt's does.
		if _, ok, _ := w.env.ChildFinished(w.c, w.inst, w.tasks["sub"], "kid-1", workflow.StatusCompleted, nil, w.now); ok {
			t.Fatalf("%s: the first child's outcome was taken for the second's", status)
		}
		ch, _, _ = w.env.ChildFinished(w.c, w.inst, w.tasks["sub"], "kid-2", status, nil, w.now)
		w.apply(ch)
		if w.step("sub").Status != workflow.StepFailed || w.step("sub").Attempts != 2 || w.inst.Status != workflow.StatusFailed {
			t.Fatalf("%s: after the second child: %+v, workflow %s", status, w.step("sub"), w.inst.Status)
		}
	}
}

func TestChildStillRunningDecidesNothing(t *testing.T) {
	w := started(t, parentDef, `{"sku": "A-1"}`)
	w.startChild("kid-1")
	if _, ok, err := w.env.ChildFinished(w.c, w.inst, w.tasks["sub"], "kid-1", workflow.StatusRunning, nil, w.now); ok || err != nil {
		t.Fatalf("a running child: ok %v, %v", ok, err)
	}
}

func TestChildOutputIsTheChildsOutput(t *testing.T) {
	c := compileDef(t, `
name: kid
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a]}
  - {id: c, type: task, handler: h, depends_on: [a]}
  - {id: d, type: wait}
`)
	state := c.Def.InitialState()
	state.Steps["a"] = &workflow.StepState{Status: workflow.StepCompleted, Output: json.RawMessage(`1`)}
	state.Steps["b"] = &workflow.StepState{Status: workflow.StepCompleted, Output: json.RawMessage(`{"x":2}`)}
	state.Steps["c"] = &workflow.StepState{Status: workflow.StepCompleted}
	state.Steps["d"] = &workflow.StepState{Status: workflow.StepSkipped}
	out, err := ChildOutput(c, json.RawMessage(`{}`), state, nil, 0)
	if err != nil || string(out) != `{"b":{"x":2},"c":null}` {
		t.Fatalf("ChildOutput = %s, %v", out, err)
	}
	if out, err := ChildOutput(c, json.RawMessage(`{}`), state, json.RawMessage(`{"total":3}`), 0); err != nil || string(out) != `{"total":3}` {
		t.Fatalf("ChildOutput of a written output = %s, %v", out, err)
	}
	templ := compileDef(t, `
name: kid
output: {first: "{{ .steps.a.output }}", sku: "{{ .input.sku }}"}
steps:
  - {id: a, type: task, handler: h}
`)
	state = templ.Def.InitialState()
	state.Steps["a"] = &workflow.StepState{Status: workflow.StepCompleted, Output: json.RawMessage(`1`)}
	if out, err := ChildOutput(templ, json.RawMessage(`{"sku":"A-1"}`), state, nil, 0); err != nil || string(out) != `{"first":1,"sku":"A-1"}` {
		t.Fatalf("ChildOutput by the output template = %s, %v", out, err)
	}
}

func TestChildErrorsNameTheirCause(t *testing.T) {
	if e := UnknownDefinitionError("nowhere"); e != `child workflow definition "nowhere" does not exist` {
		t.Errorf("unknown definition: %q", e)
	}
	if e := DepthError(10); !strings.Contains(e, "deeper than 10 levels") {
		t.Errorf("depth: %q", e)
	}
}

// The children of a parent that no longer runs are cancelled from the
// status they were read in; one that finished, or that is no child, is
// left alone.
func TestCancelAbandonedChildren(t *testing.T) {
	kid := func(id string, status workflow.Status) *workflow.Instance {
		return &workflow.Instance{ID: id, Status: status, Parent: &workflow.ParentRef{WorkflowID: "mom", Step: "s"}}
	}
	got := CancelAbandoned([]*workflow.Instance{
		kid("r1", workflow.StatusRunning), kid("p1", workflow.StatusPaused), kid("r2", workflow.StatusRunning),
		kid("q1", workflow.StatusQueued), kid("n1", workflow.StatusPending),
		kid("done", workflow.StatusCompleted), kid("failed", workflow.StatusFailed), kid("gone", workflow.StatusCancelled),
		kid("late", workflow.StatusTimedOut), {ID: "top", Status: workflow.StatusRunning},
	})
	want := map[workflow.Status][]string{
		workflow.StatusRunning: {"r1", "r2"}, workflow.StatusPaused: {"p1"},
		workflow.StatusQueued: {"q1"}, workflow.StatusPending: {"n1"},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("CancelAbandoned = %v, want %v", got, want)
	}
	if AbandonedCause != "cancel: its parent workflow no longer runs" {
		t.Errorf("cause %q", AbandonedCause)
	}
}
