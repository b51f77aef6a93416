package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// raceDef races a remote task, a wait step and a long timer; decide takes
// the first to complete.
const raceDef = `
name: race
steps:
  - {id: work, type: task, handler: remote}
  - {id: approve, type: wait}
  - {id: timer, type: sleep, duration: 1h}
  - {id: decide, type: wait, depends_on: [work, approve, timer], join: first}
`

// taskOf returns the task row of step.
func (n *node) taskOf(id, step string) *store.Task {
	n.t.Helper()
	rows, err := n.st.TasksOfInstance(context.Background(), id)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, r := range rows {
		if r.StepID == step {
			return r
		}
	}
	n.t.Fatalf("workflow %s has no task for step %s", id, step)
	return nil
}

// A wait step completed from outside wins the race: the leased task and the
// timer are withdrawn in the same write, their tasks cancelled, and the
// worker holding the task is fenced off.
func TestJoinFirstWithdrawsLeasedTaskAndTimer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(raceDef)
		ctx := context.Background()
		n.start("race", "r-1", "")
		leased := n.poll()
		inst := n.complete("r-1", "approve")
		wantSteps(t, "after the approval", inst, map[string]workflow.StepStatus{
			"approve": workflow.StepCompleted, "decide": workflow.StepWaiting,
			"work": workflow.StepSkipped, "timer": workflow.StepSkipped})
		for _, step := range []string{"work", "timer"} {
			if tk := n.taskOf("r-1", step); tk.Status != store.TaskCancelled {
				t.Errorf("the task of withdrawn step %s is %s, want CANCELLED", step, tk.Status)
			}
		}
		if err := n.eng.CompleteTask(ctx, leased.ID, leased.Lease, json.RawMessage(`1`)); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("late completion of the withdrawn task: %v, want ErrLeaseLost", err)
		}
		if err := n.eng.FailTask(ctx, leased.ID, leased.Lease, "late", true); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("late failure of the withdrawn task: %v, want ErrLeaseLost", err)
		}
		if _, err := n.eng.Heartbeat(ctx, leased.ID, leased.Lease, time.Minute); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("late heartbeat of the withdrawn task: %v, want ErrLeaseLost", err)
		}
		done := n.complete("r-1", "decide")
		if done.Status != workflow.StatusCompleted || string(done.Output) != `{"decide":"done"}` {
			t.Errorf("instance %s, output %s", done.Status, done.Output)
		}
		n.checkHistory(done)
	})
}

// A task completion wins: the withdrawn wait step takes no completion
// (ErrStepNotReady, 409 in the API), and the timer's task is cancelled by
// the completion's own write.
func TestJoinFirstWithdrawnWaitStepRefusesCompletion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(raceDef)
		ctx := context.Background()
		n.start("race", "r-2", "")
		leased := n.poll()
		if err := n.eng.CompleteTask(ctx, leased.ID, leased.Lease, json.RawMessage(`"w"`)); err != nil {
			t.Fatal(err)
		}
		inst, err := n.st.Get(ctx, "r-2")
		if err != nil {
			t.Fatal(err)
		}
		wantSteps(t, "after the task", inst, map[string]workflow.StepStatus{
			"work": workflow.StepCompleted, "approve": workflow.StepSkipped, "timer": workflow.StepSkipped, "decide": workflow.StepWaiting})
		if tk := n.taskOf("r-2", "timer"); tk.Status != store.TaskCancelled {
			t.Errorf("the timer's task is %s, want CANCELLED", tk.Status)
		}
		v := inst.Version
		_, err = n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: "r-2", Step: "approve", Output: json.RawMessage(`1`), ExpectedVersion: &v})
		if !errors.Is(err, engine.ErrStepNotReady) {
			t.Errorf("completing the withdrawn wait step: %v, want ErrStepNotReady", err)
		}
		n.checkHistory(inst)
	})
}

// In-process workers: a completion that withdraws another step's task
// cannot be the one-statement completion (it needs that task's row); it
// reads and decides again, and the timer's task is cancelled.
func TestJoinFirstWithInProcessWorkers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		echo := func(_ context.Context, tk engine.Task) (json.RawMessage, error) { return tk.Input, nil }
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo}})
		n.define(`
name: fast
steps:
  - {id: quick, type: task, handler: echo, input: {v: "{{ .input.v }}"}}
  - {id: slow, type: sleep, duration: 1h}
  - {id: next, type: task, handler: echo, depends_on: [quick, slow], join: first, input: {q: "{{ .steps.quick.output.v }}", s: "{{ .steps.slow.output }}"}}
output: {next: "{{ .steps.next.output }}", slow: "{{ .steps.slow.output }}"}
`)
		n.start("fast", "f-1", `{"v": 3}`)
		inst := n.waitStatus("f-1", workflow.StatusCompleted, 10*time.Second)
		wantSteps(t, "completed", inst, map[string]workflow.StepStatus{"quick": workflow.StepCompleted, "slow": workflow.StepSkipped, "next": workflow.StepCompleted})
		if string(inst.Output) != `{"next":{"q":3,"s":null},"slow":null}` {
			t.Errorf("output = %s", inst.Output)
		}
		if tk := n.taskOf("f-1", "slow"); tk.Status != store.TaskCancelled {
			t.Errorf("the timer's task is %s, want CANCELLED", tk.Status)
		}
		n.checkHistory(inst)
	})
}

// when, skip propagation, join any and the output, through the engine: an
// instance whose every step is skipped completes at start.
func TestWhenSkipsAndOutputThroughTheEngine(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(`
name: cond
steps:
  - {id: a, type: wait, when: '.input.a'}
  - {id: b, type: wait, when: '.input.b'}
  - {id: c, type: wait, depends_on: [a]}
  - {id: d, type: wait, depends_on: [a, b], join: any}
  - {id: e, type: wait, depends_on: [a], when: '.steps.a.output.x'}
`)
		ctx := context.Background()
		none := n.start("cond", "none", `{}`)
		if none.Status != workflow.StatusCompleted || string(none.Output) != `{}` || none.Version != 1 {
			t.Errorf("every step skipped: %s at version %d, output %s; want COMPLETED at 1, {}", none.Status, none.Version, none.Output)
		}
		got, err := n.st.Get(ctx, "none")
		if err != nil || got.Status != workflow.StatusCompleted || string(got.Output) != `{}` {
			t.Fatalf("stored: %+v, %v", got, err)
		}
		if causes := n.lastCauses(got, 2); causes[0] != "RUNNING start" || causes[1] != "COMPLETED every step was skipped at start" {
			t.Errorf("causes %q", causes)
		}

		n.start("cond", "some", `{"b": true}`)
		inst := n.complete("some", "b")
		wantSteps(t, "after b", inst, map[string]workflow.StepStatus{"a": workflow.StepSkipped, "c": workflow.StepSkipped, "d": workflow.StepWaiting})
		inst = n.complete("some", "d")
		if inst.Status != workflow.StatusCompleted || string(inst.Output) != `{"d":"done"}` {
			t.Errorf("instance %s, output %s", inst.Status, inst.Output)
		}

		n.start("cond", "bad", `{"a": {"x": 1}}`)
		if _, err := n.eng.Action(ctx, "bad", "pause"); err != nil {
			t.Fatal(err)
		}
		n.complete("bad", "a")
		// On resume, e's when fails on a's output (a string): the step
		// and the instance fail, in the resume's second version.
		resumed, err := n.eng.Action(ctx, "bad", "resume")
		if err != nil || resumed.Status != workflow.StatusFailed {
			t.Fatalf("resume: %+v, %v", resumed, err)
		}
		if e := resumed.State.Steps["e"]; e.Status != workflow.StepFailed || !strings.HasPrefix(e.Error, "when: ") {
			t.Errorf("e: %+v, want FAILED with a when: error", e)
		}
		n.checkHistory(resumed)
	})
}

// An output template that does not render fails the instance, and the
// history says why.
func TestOutputRenderFailureFailsTheInstance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(`
name: badout
steps:
  - {id: a, type: wait}
output: "{{ .steps.a.output.missing }}"
`)
		n.start("badout", "b-1", "")
		inst := n.complete("b-1", "a")
		if inst.Status != workflow.StatusFailed || inst.Output != nil {
			t.Fatalf("instance %s, output %s; want FAILED without output", inst.Status, inst.Output)
		}
		if c := n.lastCauses(inst, 1)[0]; !strings.Contains(c, "the workflow output failed to render") || !strings.Contains(c, "{{ .steps.a.output.missing }}") {
			t.Errorf("cause %q", c)
		}
	})
}
