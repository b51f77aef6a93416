package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const orderCode = `
name: order
code: {handler: order}
retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms}
`

// codeWorker acts as a remote worker of code workflows through the
// engine's API: it polls runs and records what their code does.
type codeWorker struct {
	t *testing.T
	n *node
}

func (w codeWorker) run(wait time.Duration) *engine.Task {
	w.t.Helper()
	task, err := w.n.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"order"}, Wait: wait})
	if err != nil {
		w.t.Fatal(err)
	}
	if task == nil {
		w.t.Fatal("no run delivered")
	}
	if task.Kind != engine.KindWorkflow {
		w.t.Fatalf("kind = %q, want %q", task.Kind, engine.KindWorkflow)
	}
	return task
}

func (w codeWorker) step(task *engine.Task, name string, rec rules.Recorded) *workflow.StepState {
	w.t.Helper()
	st, err := w.n.eng.Checkpoint(context.Background(), task.ID, task.Lease, name, rec)
	if err != nil {
		w.t.Fatalf("checkpoint %s: %v", name, err)
	}
	return st
}

func journal(t *testing.T, task *engine.Task) map[string]map[string]any {
	t.Helper()
	var j map[string]map[string]any
	if err := json.Unmarshal(task.Journal, &j); err != nil {
		t.Fatalf("journal %s: %v", task.Journal, err)
	}
	return j
}

// A code workflow's run records steps once each, ends waiting for a
// sleep and an event, and is run again (replaying its journal) when each
// has finished; its return value completes the workflow.
func TestCodeWorkflowRecordsStepsAndWaits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		inst := n.start("order", "o1", `{"order":"o-1"}`)
		if inst.Status != workflow.StatusRunning || len(inst.State.Steps) != 0 {
			t.Fatalf("started %s with steps %v", inst.Status, inst.State.Steps)
		}

		run := w.run(5 * time.Second)
		if run.Attempt != 1 || string(run.Input) != `{"order":"o-1"}` || string(run.Journal) != `{}` {
			t.Fatalf("first run: attempt %d, input %s, journal %s", run.Attempt, run.Input, run.Journal)
		}
		a := w.step(run, "a", rules.Recorded{Output: json.RawMessage(`1`)})
		if a.Status != workflow.StepCompleted || string(a.Output) != `1` || string(a.Extra["seq"]) != `1` || string(a.Extra["kind"]) != `"step"` {
			t.Errorf("a = %+v", a)
		}
		before, _ := n.st.Get(t.Context(), "o1")
		// First write wins: the replay of a recorded step gets the
		// recorded entry, and nothing is written.
		if again := w.step(run, "a", rules.Recorded{Output: json.RawMessage(`2`)}); string(again.Output) != `1` {
			t.Errorf("a again = %s, want the recorded 1", again.Output)
		}
		if after, _ := n.st.Get(t.Context(), "o1"); after.Version != before.Version {
			t.Errorf("a recorded step checkpointed again moved the version %d → %d", before.Version, after.Version)
		}
		h, err := n.st.History(t.Context(), "o1", before.Version, 0)
		if err != nil || len(h) != 1 || h[0].Cause != `step "a" completed` {
			t.Errorf("history of the checkpoint = %+v, %v", h, err)
		}
		if f := w.step(run, "b", rules.Recorded{Failed: true, Error: "card declined", Attempts: 3}); f.Status != workflow.StepFailed || f.Error != "card declined" || f.Attempts != 3 {
			t.Errorf("b = %+v", f)
		}
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"nap": {Sleep: 200 * time.Millisecond}}); err != nil {
			t.Fatal(err)
		}
		// The run is over: its lease records nothing more.
		if _, err := n.eng.Checkpoint(t.Context(), run.ID, run.Lease, "c", rules.Recorded{}); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("checkpoint of a suspended run: %v, want ErrLeaseLost", err)
		}
		if got, _ := n.st.Get(t.Context(), "o1"); got.State.Steps["nap"].Status != workflow.StepWaiting {
			t.Errorf("nap is %s, want WAITING", got.State.Steps["nap"].Status)
		}

		// The timer fires and queues the next run, which replays.
		run2 := w.run(10 * time.Second)
		j := journal(t, run2)
		if run2.Attempt != 1 || j["a"]["output"] != 1.0 || j["b"]["status"] != "FAILED" || j["nap"]["status"] != "COMPLETED" || j["nap"]["kind"] != "sleep" {
			t.Fatalf("second run: attempt %d, journal %s", run2.Attempt, run2.Journal)
		}
		if err := n.eng.Suspend(t.Context(), run2.ID, run2.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "o-1"}}); err != nil {
			t.Fatal(err)
		}
		if ev, err := n.eng.PublishEvent(t.Context(), "payment", "o-1", json.RawMessage(`{"amount":5}`)); err != nil || len(ev.Delivered) != 1 {
			t.Fatalf("publish: %+v, %v", ev, err)
		}
		run3 := w.run(5 * time.Second)
		if p := journal(t, run3)["paid"]; p["status"] != "COMPLETED" || p["output"].(map[string]any)["amount"] != 5.0 {
			t.Fatalf("third run's journal: %s", run3.Journal)
		}
		if err := n.eng.CompleteTask(t.Context(), run3.ID, run3.Lease, json.RawMessage(`{"shipped":true}`)); err != nil {
			t.Fatal(err)
		}
		done := n.waitStatus("o1", workflow.StatusCompleted, 5*time.Second)
		if string(done.Output) != `{"shipped":true}` {
			t.Errorf("output = %s", done.Output)
		}
	})
}

// An event published before the wait began is taken when the run waits for
// it: the next run is queued in the same breath.
func TestCodeWorkflowTakesAnEventPublishedBefore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "o2", `{}`)
		if _, err := n.eng.PublishEvent(t.Context(), "payment", "early", json.RawMessage(`7`)); err != nil {
			t.Fatal(err)
		}
		run := w.run(5 * time.Second)
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "early"}}); err != nil {
			t.Fatal(err)
		}
		run2 := w.run(5 * time.Second)
		if p := journal(t, run2)["paid"]; p["status"] != "COMPLETED" || p["output"] != 7.0 {
			t.Fatalf("journal: %s", run2.Journal)
		}
		// Awaiting what has finished ends no run: the next one is queued
		// at once.
		if err := n.eng.Suspend(t.Context(), run2.ID, run2.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "early"}}); err != nil {
			t.Fatal(err)
		}
		w.run(5 * time.Second)
	})
}

// A failed run is run again per the definition's retry; the last failure
// fails the workflow with its error.
func TestCodeWorkflowRunsAreRetried(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "o3", `{}`)
		run := w.run(5 * time.Second)
		w.step(run, "a", rules.Recorded{Output: json.RawMessage(`"kept"`)})
		if err := n.eng.FailTask(t.Context(), run.ID, run.Lease, "boom", true); err != nil {
			t.Fatal(err)
		}
		run2 := w.run(5 * time.Second)
		if run2.Attempt != 2 || journal(t, run2)["a"]["output"] != "kept" {
			t.Fatalf("retried run: attempt %d, journal %s", run2.Attempt, run2.Journal)
		}
		if err := n.eng.FailTask(t.Context(), run2.ID, run2.Lease, "boom again", true); err != nil {
			t.Fatal(err)
		}
		inst := n.waitStatus("o3", workflow.StatusFailed, 5*time.Second)
		if !strings.Contains(string(inst.State.Extra["code"]), "boom again") {
			t.Errorf("state.code = %s, want the last error", inst.State.Extra["code"])
		}
	})
}

// Code that asks, under a recorded name, for another kind than was
// recorded fails the workflow for good, naming the step and both kinds.
func TestCodeWorkflowNonDeterminism(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "o4", `{}`)
		run := w.run(5 * time.Second)
		w.step(run, "x", rules.Recorded{Output: json.RawMessage(`1`)})
		err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"x": {Sleep: time.Second}})
		if !errors.Is(err, engine.ErrNonDeterminism) || !strings.Contains(err.Error(), `step "x" was recorded as a step, and the code now asks for a sleep`) {
			t.Fatalf("suspend on a recorded step: %v", err)
		}
		inst, _ := n.st.Get(t.Context(), "o4")
		if inst.Status != workflow.StatusFailed || !strings.Contains(string(inst.State.Extra["code"]), "non-determinism") {
			t.Errorf("workflow %s, state.code %s; want FAILED naming the non-determinism", inst.Status, inst.State.Extra["code"])
		}
	})
}

// An event wait with a timeout fails with a timeout error when no event
// came in time (its event task withdrawn: a later event finds no waiter);
// one whose event comes first withdraws its timer.
func TestCodeWorkflowEventTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "late", `{}`)
		run := w.run(5 * time.Second)
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "late", Timeout: 200 * time.Millisecond}}); err != nil {
			t.Fatal(err)
		}
		run2 := w.run(10 * time.Second)
		paid := journal(t, run2)["paid"]
		if e, _ := paid["error"].(map[string]any); paid["status"] != "FAILED" || e["type"] != "timeout" || !strings.Contains(e["message"].(string), `no event "payment" came within 200ms`) {
			t.Fatalf("journal after the timeout: %s", run2.Journal)
		}
		if ev, err := n.eng.PublishEvent(t.Context(), "payment", "late", nil); err != nil || len(ev.Delivered) != 0 {
			t.Errorf("an event after the timeout was delivered to %v (%v)", ev.Delivered, err)
		}

		n.start("order", "early", `{}`)
		run = w.run(5 * time.Second)
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "early", Timeout: time.Hour}}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.eng.PublishEvent(t.Context(), "payment", "early", json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
		w.run(5 * time.Second)
		tasks, err := n.st.TasksOfInstance(t.Context(), "early")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if task.StepID == "paid" && task.Status.Active() {
				t.Errorf("task %s of paid (iteration %d, queue %s) is still %s", task.ID, task.Iteration, task.Queue, task.Status)
			}
		}
	})
}

// A code workflow waits for children of any kind (a flowd DAG here, and an
// unknown definition, which fails the wait), and is itself the child of a
// flowd DAG, which completes with the code's return value.
func TestCodeWorkflowChildren(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		greet := func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			var in struct{ Name string }
			_ = json.Unmarshal(task.Input, &in)
			return json.Marshal("hello " + in.Name)
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"greet": greet}})
		n.define(orderCode)
		n.define("name: greeting\nsteps:\n  - {id: hi, type: task, handler: greet, input: {name: \"{{ .input.name }}\"}}\n")
		n.define("name: parent\nsteps:\n  - {id: sub, type: workflow, definition: order, input: {n: 1}}\n")
		w := codeWorker{t: t, n: n}

		n.start("order", "p1", `{}`)
		run := w.run(5 * time.Second)
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"kid": {Child: "greeting", ChildInput: json.RawMessage(`{"name":"ana"}`)}}); err != nil {
			t.Fatal(err)
		}
		run2 := w.run(10 * time.Second)
		if kid := journal(t, run2)["kid"]; kid["status"] != "COMPLETED" || kid["kind"] != "child" || kid["output"].(map[string]any)["hi"] != "hello ana" {
			t.Fatalf("journal after the child: %s", run2.Journal)
		}
		if err := n.eng.Suspend(t.Context(), run2.ID, run2.Lease, map[string]rules.Wait{"ghost": {Child: "nowhere"}}); err != nil {
			t.Fatal(err)
		}
		run3 := w.run(10 * time.Second)
		if g := journal(t, run3)["ghost"]; g["status"] != "FAILED" || !strings.Contains(g["error"].(string), "nowhere") {
			t.Fatalf("journal after an unknown child: %s", run3.Journal)
		}

		parent := n.start("parent", "dag", `{}`)
		child := w.run(10 * time.Second)
		if child.WorkflowID == parent.ID {
			t.Fatal("the run delivered is the parent's")
		}
		if err := n.eng.CompleteTask(t.Context(), child.ID, child.Lease, json.RawMessage(`42`)); err != nil {
			t.Fatal(err)
		}
		done := n.waitStatus("dag", workflow.StatusCompleted, 10*time.Second)
		if string(done.State.Steps["sub"].Output) != `42` {
			t.Errorf("the parent's step took %s, want the code's 42", done.State.Steps["sub"].Output)
		}
	})
}

// A failed code workflow that is retried runs its function again: the
// steps it recorded as completed stay, a step that failed and a wait that
// was cancelled by the failure run again (the wait's old row queued
// again).
func TestCodeWorkflowRetryAfterFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: order\ncode: {handler: order}\nretry: {max_attempts: 1}\n")
		w := codeWorker{t: t, n: n}
		n.start("order", "r1", `{}`)
		run := w.run(5 * time.Second)
		w.step(run, "ok", rules.Recorded{Output: json.RawMessage(`1`)})
		w.step(run, "bad", rules.Recorded{Failed: true, Error: "no"})
		if err := n.eng.Suspend(t.Context(), run.ID, run.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "r1"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.eng.Transition(t.Context(), "r1", workflow.StatusRunning, workflow.StatusFailed); err != nil {
			t.Fatal(err)
		}
		inst := n.waitStatus("r1", workflow.StatusFailed, 5*time.Second)
		if inst.State.Steps["paid"].Status != workflow.StepCancelled {
			t.Fatalf("paid is %s after the cancel", inst.State.Steps["paid"].Status)
		}
		if _, err := n.eng.Action(t.Context(), "r1", "retry"); err != nil {
			t.Fatal(err)
		}
		run2 := w.run(5 * time.Second)
		j := journal(t, run2)
		if _, bad := j["bad"]; bad || j["ok"]["status"] != "COMPLETED" || j["paid"] != nil {
			t.Fatalf("journal after the retry: %s", run2.Journal)
		}
		if err := n.eng.Suspend(t.Context(), run2.ID, run2.Lease, map[string]rules.Wait{"paid": {Event: "payment", Key: "r1"}}); err != nil {
			t.Fatal(err)
		}
		if ev, err := n.eng.PublishEvent(t.Context(), "payment", "r1", json.RawMessage(`5`)); err != nil || len(ev.Delivered) != 1 {
			t.Fatalf("the wait queued again took no event: %+v %v", ev, err)
		}
		w.run(5 * time.Second)
	})
}

// ctx.set writes state.variables.KEY in a version of its own; setting the
// value it has (a replay) writes nothing; a run that no longer holds its
// lease sets nothing.
func TestCodeWorkflowSetsVariables(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "v1", `{}`)
		run := w.run(5 * time.Second)
		before, _ := n.st.Get(t.Context(), "v1")
		for range 2 {
			if err := n.eng.SetVariable(t.Context(), run.ID, run.Lease, "stage", json.RawMessage(`{"n": 1}`)); err != nil {
				t.Fatal(err)
			}
		}
		after, _ := n.st.Get(t.Context(), "v1")
		if after.Version != before.Version+1 || string(after.State.Variables["stage"]) != `{"n":1}` {
			t.Errorf("after setting stage twice: version %d → %d, stage %s", before.Version, after.Version, after.State.Variables["stage"])
		}
		if h, err := n.st.History(t.Context(), "v1", after.Version, 0); err != nil || h[0].Cause != `variable "stage" set` {
			t.Errorf("history: %+v %v", h, err)
		}
		if err := n.eng.SetVariable(t.Context(), run.ID, "stale", "stage", json.RawMessage(`2`)); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("set under a stale lease: %v", err)
		}
		if err := n.eng.SetVariable(t.Context(), run.ID, run.Lease, "a#2", json.RawMessage(`2`)); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("set of a bad key: %v", err)
		}
	})
}

// A code definition's concurrency key queues the starts past its limit, a
// schedule starts its workflows, a paused workflow's run is not delivered
// until it is resumed, and its timeout ends it.
func TestCodeWorkflowLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: order\ncode: {handler: order}\nconcurrency: {key: \"{{ .input.k }}\", limit: 1}\n")
		n.define("name: short\ncode: {handler: order}\ntimeout: 300ms\n")
		w := codeWorker{t: t, n: n}

		first := n.start("order", "k1-a", `{"k":"one"}`)
		second := n.start("order", "k1-b", `{"k":"one"}`)
		if first.Status != workflow.StatusRunning || second.Status != workflow.StatusQueued {
			t.Fatalf("starts under one key: %s and %s, want RUNNING and QUEUED", first.Status, second.Status)
		}
		run := w.run(5 * time.Second)
		if run.WorkflowID != "k1-a" {
			t.Fatalf("delivered %s's run, want k1-a's", run.WorkflowID)
		}
		if err := n.eng.CompleteTask(t.Context(), run.ID, run.Lease, json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
		n.waitStatus("k1-b", workflow.StatusRunning, 5*time.Second)
		if _, err := n.eng.Action(t.Context(), "k1-b", "pause"); err != nil {
			t.Fatal(err)
		}
		if task, err := n.eng.Poll(t.Context(), engine.PollParams{Worker: "w", Handlers: []string{"order"}, Wait: 300 * time.Millisecond}); err != nil || task != nil {
			t.Fatalf("a paused workflow's run was delivered: %+v, %v", task, err)
		}
		if _, err := n.eng.Action(t.Context(), "k1-b", "resume"); err != nil {
			t.Fatal(err)
		}
		if run := w.run(5 * time.Second); run.WorkflowID != "k1-b" {
			t.Fatalf("after the resume: %s's run", run.WorkflowID)
		}

		if _, _, err := n.eng.PutSchedule(t.Context(), store.Schedule{Name: "nightly", Definition: "short", Cron: "@every 1h"}); err != nil {
			t.Fatal(err)
		}
		fired, err := n.eng.TriggerSchedule(t.Context(), "nightly")
		if err != nil || fired.Definition != "short" || fired.Status != workflow.StatusRunning {
			t.Fatalf("trigger: %+v, %v", fired, err)
		}
		n.waitStatus(fired.ID, workflow.StatusTimedOut, 5*time.Second)
	})
}
