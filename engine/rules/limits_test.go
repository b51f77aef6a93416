package rules

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

const retryLoop = `
name: loop
steps:
  - {id: a, type: task, handler: h, retry: {max_attempts: 1000}}
  - {id: w, type: wait}
`

// A step retried without end stops at the version limit: the decision
// that would leave no room fails the instance in its own version, the last
// one an instance may have (MaxVersions-1), whatever the limit's parity
// against the two versions of an attempt (delivery, failure).
func TestVersionLimitFailsARetryLoop(t *testing.T) {
	for _, max := range []int{5, 6, 7, 8, 41} {
		w := started(t, retryLoop, `{}`)
		w.env.MaxVersions = max
		var last Change
		for w.inst.Status == workflow.StatusRunning {
			w.deliver("a")
			last = w.fail("a", "boom", true)
		}
		w.wantStatus(workflow.StatusFailed)
		if w.inst.Version != int64(max-1) {
			t.Errorf("max %d: failed at version %d, want %d", max, w.inst.Version, max-1)
		}
		if want := "; " + VersionLimitError(max); last.Note != want || !strings.Contains(last.Note, "--max-versions (") {
			t.Errorf("max %d: the failing version's note %q, want %q", max, last.Note, want)
		}
		// Nothing runs on: the retry the failure queued is cancelled, the
		// other active step (w WAITING) withdrawn.
		if a := w.tasks["a"]; a.Status != store.TaskCancelled || a.Lease != "" || len(last.Insert) != 0 || last.Next != nil {
			t.Errorf("max %d: a's task %+v, inserted %v", max, a, last.Insert)
		}
		w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepCancelled, "w": workflow.StepCancelled})
		if len(last.Withdrawn) != 1 || last.Withdrawn[0] != "w" {
			t.Errorf("max %d: withdrawn %v, want [w]", max, last.Withdrawn)
		}
	}
}

// A change that ends the instance may take the last version; any other
// leaves it for the failure. A delivery writes no version.
func TestVersionLimitLeavesTheLastVersionToTheEnd(t *testing.T) {
	const chain = `
name: chain
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a]}
`
	for _, c := range []struct {
		max     int
		status  workflow.Status
		version int64
	}{
		{0, workflow.StatusCompleted, 2}, // no limit: complete a, complete b
		{4, workflow.StatusCompleted, 2},
		{3, workflow.StatusCompleted, 2}, // b's completion takes the last version
		{2, workflow.StatusFailed, 1},    // a's completion would leave no room
	} {
		w := started(t, chain, `{}`)
		w.env.MaxVersions = c.max
		w.deliver("a")
		w.complete("a", `1`)
		if w.inst.Status == workflow.StatusRunning {
			w.deliver("b")
			w.complete("b", `2`)
		}
		if w.inst.Status != c.status || w.inst.Version != c.version {
			t.Errorf("max %d: %s at version %d, want %s at %d", c.max, w.inst.Status, w.inst.Version, c.status, c.version)
		}
	}
}

// A paused instance is not failed (PAUSED cannot become FAILED): the
// first decision after its resume is.
func TestVersionLimitWaitsForAPausedInstance(t *testing.T) {
	w := started(t, retryLoop, `{}`)
	w.env.MaxVersions = 3
	w.deliver("a")
	if _, err := w.act("pause"); err != nil {
		t.Fatal(err)
	}
	w.fail("a", "boom", true)
	w.wantStatus(workflow.StatusPaused)
	if _, err := w.act("resume"); err != nil {
		t.Fatal(err)
	}
	w.deliver("a")
	w.fail("a", "boom", true)
	w.wantStatus(workflow.StatusFailed)
}

// A workflow step whose parent has no room left for the child's outcome
// starts no child.
func TestVersionLimitStartsNoChild(t *testing.T) {
	w := started(t, "name: p\nsteps:\n  - {id: sub, type: workflow, definition: c}\n", `{}`)
	w.env.MaxVersions = 2
	task := w.deliver("sub") // version 0: one version left before the last
	if _, err := w.env.StartChild(w.inst, task, task.Lease, "child-1", w.now); !errors.Is(err, ErrVersionLimit) || !strings.Contains(err.Error(), "--max-versions (2)") {
		t.Fatalf("StartChild at the limit: %v", err)
	}
	w.env.MaxVersions = 3
	if _, err := w.env.StartChild(w.inst, task, task.Lease, "child-1", w.now); err != nil {
		t.Fatalf("StartChild with room: %v", err)
	}
}

const spin = `
document: {dsl: '1.0.0', namespace: test, name: spin, version: '1.0.0'}
do:
  - spin:
      set:
        n: ${ (.n // 0) + 1 }
      then: spin
`

// swStarted returns a world whose instance runs the Serverless Workflow
// document doc.
func swStarted(t *testing.T, doc string) *world {
	t.Helper()
	raw, err := workflow.DocumentJSON([]byte(doc), "document")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(&workflow.Definition{Name: "spin", Serverless: raw})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, env: testEnv(), c: c, tasks: map[string]*store.Task{}, now: t0}
	w.inst = &workflow.Instance{ID: "wf-1", Definition: "spin", Input: json.RawMessage(`{}`), State: workflow.State{}}
	ch, err := w.env.Start(w.c, w.inst, w.now)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	w.apply(ch)
	w.inst.Version = 0
	return w
}

// tick runs the Serverless Workflow instance's one queued tick as the
// engine's timer worker does: leased, then completed.
func (w *world) tick() Change {
	w.t.Helper()
	var task *store.Task
	for _, tk := range w.tasks {
		if tk.Status == store.TaskQueued {
			if task != nil {
				w.t.Fatalf("two queued tasks: %+v, %+v", task, tk)
			}
			task = tk
		}
	}
	if task == nil || task.Queue != store.QueueTick {
		w.t.Fatalf("no queued tick: %+v", w.tasks)
	}
	task.Deliver("worker", w.env.NewID(), w.now, time.Minute)
	ch, err := w.env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage("null"), NextLease{}, w.now)
	if err != nil {
		w.t.Fatalf("completing tick %s: %v", task.StepID, err)
	}
	w.apply(ch)
	return ch
}

// A Serverless Workflow task that jumps to itself writes a version per
// round, for ever without the limit; with it the instance fails at the
// limit, its error (the document's fault) naming it, no item left pending.
func TestVersionLimitStopsATaskThatJumpsToItself(t *testing.T) {
	w := swStarted(t, spin)
	w.env.MaxVersions = 20
	var last Change
	for rounds := 0; w.inst.Status == workflow.StatusRunning; rounds++ {
		if rounds > 100 {
			t.Fatalf("still running after %d rounds, at version %d", rounds, w.inst.Version)
		}
		last = w.tick()
	}
	w.wantStatus(workflow.StatusFailed)
	if w.inst.Version != 19 {
		t.Errorf("failed at version %d, want 19", w.inst.Version)
	}
	rt, err := SWRuntime(w.inst.State)
	if err != nil {
		t.Fatal(err)
	}
	if f := rt.Fault; f == nil || f.Type != sw.ErrorTypePrefix+sw.KindRuntime || !strings.Contains(f.Detail, "--max-versions (20)") {
		t.Errorf("fault %+v", f)
	}
	if len(rt.Items) != 0 || len(w.inst.State.Steps) != 0 || len(last.Insert) != 0 {
		t.Errorf("pending %v, steps %v, inserted %v", rt.Items, w.inst.State.Steps, last.Insert)
	}
	shown := w.inst
	shown.ShowError()
	if !strings.Contains(string(shown.Error), "--max-versions (20)") {
		t.Errorf("the instance's error: %s", shown.Error)
	}
}

const grow = `
document: {dsl: '1.0.0', namespace: test, name: grow, version: '1.0.0'}
do:
  - grow:
      set:
        s: ${ (.s // "") + "0123456789abcdefghijklmnopqrstuvwxyz" }
      then: grow
`

// A Serverless Workflow whose next state would be larger than the state
// limit fails in that version, its error naming the limit, instead of the
// tick being decided again (and refused) for ever.
func TestStateLimitFailsAServerlessWorkflow(t *testing.T) {
	w := swStarted(t, grow)
	w.env.MaxStateBytes = 2000
	var last Change
	for rounds := 0; w.inst.Status == workflow.StatusRunning; rounds++ {
		if rounds > 100 {
			t.Fatalf("still running after %d rounds", rounds)
		}
		last = w.tick()
	}
	w.wantStatus(workflow.StatusFailed)
	rt, err := SWRuntime(w.inst.State)
	if err != nil {
		t.Fatal(err)
	}
	if f := rt.Fault; f == nil || !strings.Contains(f.Detail, "more than --max-state-bytes (2000)") {
		t.Errorf("fault %+v", f)
	}
	if !strings.Contains(last.Note, "--max-state-bytes (2000)") || len(last.Insert) != 0 || len(rt.Items) != 0 {
		t.Errorf("last change: note %q, inserted %v, pending %v", last.Note, last.Insert, rt.Items)
	}
	if err := w.inst.State.CheckSize(2000); err != nil {
		t.Errorf("the failed state: %v", err)
	}
}

// A handler's output that would make the state too large is refused, as
// before: its worker may complete with less, or fail the attempt.
func TestStateLimitRefusesAServerlessHandlersOutput(t *testing.T) {
	w := swStarted(t, `
document: {dsl: '1.0.0', namespace: test, name: call, version: '1.0.0'}
do:
  - c:
      call: h
`)
	w.env.MaxStateBytes = 2000
	var task *store.Task
	for _, tk := range w.tasks {
		task = tk
	}
	task = w.deliver(task.StepID)
	_, err := w.env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage(`"`+strings.Repeat("x", 3000)+`"`), NextLease{}, w.now)
	if !errors.Is(err, workflow.ErrStateTooLarge) {
		t.Fatalf("an oversize output: %v", err)
	}
}

// A workflow step that ran into a limit fails for good: its attempt, its
// step (whatever its retry budget) and the RUNNING instance, its other
// active steps withdrawn, the limit named in the step's error and the
// history. A PAUSED instance's step fails without retry, the instance
// stays PAUSED.
func TestFailForLimitFailsTheInstanceForGood(t *testing.T) {
	const def = `
name: p
steps:
  - {id: sub, type: workflow, definition: p, retry: {max_attempts: 9}}
  - {id: w, type: wait}
`
	w := started(t, def, `{}`)
	task := w.deliver("sub")
	msg := DescendantLimitError("root-1", 7)
	ch, err := w.env.FailForLimit(w.c, w.inst, task, task.Lease, msg, w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	w.wantSteps(map[string]workflow.StepStatus{"sub": workflow.StepFailed, "w": workflow.StepCancelled})
	if sub := w.step("sub"); sub.Error != msg || !strings.Contains(msg, "top-level workflow root-1 reached --max-descendants (7)") {
		t.Errorf("sub: %+v", sub)
	}
	if tk := w.tasks["sub"]; tk.Status != store.TaskFailed || tk.Lease != "" || ch.Update[0].Guard != store.GuardOf(task) {
		t.Errorf("sub's task %+v, guard %+v", tk, ch.Update[0].Guard)
	}
	if ch.Note != "; "+msg || len(ch.Withdrawn) != 1 || ch.Withdrawn[0] != "w" {
		t.Errorf("note %q, withdrawn %v", ch.Note, ch.Withdrawn)
	}
	// Fenced like any lease holder's write.
	if _, err := w.env.FailForLimit(w.c, w.inst, task, "stale", msg, w.now); !errors.Is(err, ErrNotRunning) && !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a stale lease: %v", err)
	}

	paused := started(t, def, `{}`)
	task = paused.deliver("sub")
	if _, err := paused.act("pause"); err != nil {
		t.Fatal(err)
	}
	ch, err = paused.env.FailForLimit(paused.c, paused.inst, task, task.Lease, msg, paused.now)
	if err != nil {
		t.Fatal(err)
	}
	paused.apply(ch)
	paused.wantStatus(workflow.StatusPaused)
	if sub := paused.step("sub"); sub.Status != workflow.StepFailed || paused.tasks["sub"].Status != store.TaskFailed {
		t.Errorf("paused: sub %+v, task %+v", sub, paused.tasks["sub"])
	}
}

// A Serverless Workflow's child item that ran into a limit faults the
// workflow with it, past any try/catch.
func TestFailForLimitAbortsAServerlessWorkflow(t *testing.T) {
	w := swStarted(t, `
document: {dsl: '1.0.0', namespace: test, name: r, version: '1.0.0'}
do:
  - guarded:
      try:
        - again:
            run:
              workflow: {namespace: test, name: r, version: '1.0.0'}
      catch:
        do:
          - recover:
              set: {recovered: true}
`)
	var task *store.Task
	for _, tk := range w.tasks {
		task = tk
	}
	if task.Queue != store.QueueChild {
		t.Fatalf("the first task is %+v", task)
	}
	task = w.deliver(task.StepID)
	ch, err := w.env.FailForLimit(w.c, w.inst, task, task.Lease, DescendantLimitError("root-1", 7), w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	rt, err := SWRuntime(w.inst.State)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Fault == nil || !strings.Contains(rt.Fault.Detail, "--max-descendants (7)") || len(rt.Items) != 0 || len(w.inst.State.Steps) != 0 {
		t.Errorf("fault %+v, pending %v, steps %v", rt.Fault, rt.Items, w.inst.State.Steps)
	}
}
