package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// startedAny is started for an instance that may settle at once.
func startedAny(t *testing.T, yaml, input string) *world {
	t.Helper()
	w := &world{t: t, env: testEnv(), c: compileDef(t, yaml), tasks: map[string]*store.Task{}, now: t0}
	w.inst = &workflow.Instance{ID: "wf-1", Definition: w.c.Def.Name, Input: json.RawMessage(input), State: w.c.Def.InitialState()}
	ch, err := w.env.Start(w.c, w.inst, w.now)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	w.apply(ch)
	return w
}

// iter is the key of iteration index of step.
func iter(step string, index int) string { return TaskKey(step, index+1) }

// decideWithRows makes a lease holder's decision as the engine does: first
// without the other rows, then, when the rules ask for them
// (ErrNeedTasks), on a fresh copy of the instance with every row.
func (w *world) decideWithRows(decide func(env Env) (Change, error)) (Change, error) {
	w.t.Helper()
	saved, status := w.inst.State.Clone(), w.inst.Status
	ch, err := decide(w.env)
	if errors.Is(err, ErrNeedTasks) {
		w.inst.State, w.inst.Status = saved.Clone(), status
		env := w.env
		env.Tasks = w.tasks
		ch, err = decide(env)
	}
	if err != nil {
		w.inst.State, w.inst.Status = saved, status
	}
	return ch, err
}

func (w *world) completeKey(key, output string) (Change, error) {
	w.t.Helper()
	task := w.tasks[key]
	ch, err := w.decideWithRows(func(env Env) (Change, error) {
		return env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage(output), NextLease{}, w.now)
	})
	if err == nil {
		w.apply(ch)
	}
	return ch, err
}

func (w *world) failKey(key, msg string) Change {
	w.t.Helper()
	task := w.tasks[key]
	ch, err := w.decideWithRows(func(env Env) (Change, error) {
		return env.FailTask(w.c, w.inst, task, task.Lease, msg, true, w.now)
	})
	if err != nil {
		w.t.Fatalf("failing %s: %v", key, err)
	}
	w.apply(ch)
	return ch
}

// active returns the keys of the active tasks (queued or leased), sorted.
func (w *world) active() []string {
	var keys []string
	for k, t := range w.tasks {
		if t.Status.Active() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func (w *world) iterations(step string) Iterations {
	w.t.Helper()
	var it Iterations
	raw, ok := w.step(step).Extra[iterationsKey]
	if !ok {
		w.t.Fatalf("step %s has no iterations", step)
	}
	if err := json.Unmarshal(raw, &it); err != nil {
		w.t.Fatal(err)
	}
	return it
}

func TestForeachExpressionProblemsFailTheStep(t *testing.T) {
	cases := []struct{ foreach, input, want string }{
		{`.input.x | error("no list")`, `{}`, `foreach: error: no list`},
		{`.input`, `{"a":1}`, `foreach: gave an object, want an array`},
		{`.input.name`, `{"name":"x"}`, `foreach: gave a string, want an array`},
		{`.input.none`, `{}`, `foreach: gave null, want an array`},
		{`.input.n`, `{"n":3}`, `foreach: gave a number, want an array`},
		{`[range(10001)]`, `{}`, `foreach: gave 10001 items (at most 10000)`},
		{`[range(10000)] | map("x"*100000)`, `{}`,
			`foreach: expression "[range(10000)] | map(\"x\"*100000)": [...] would build a value larger than --max-state-bytes (4194304 bytes)`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			w := startedAny(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '"+tc.foreach+"'}\n", tc.input)
			w.wantStatus(workflow.StatusFailed)
			if st := w.step("a"); st.Status != workflow.StepFailed || st.Error != tc.want {
				t.Errorf("step a: %s %q, want FAILED %q", st.Status, st.Error, tc.want)
			}
			if len(w.tasks) != 0 {
				t.Errorf("tasks %v, want none", w.tasks)
			}
		})
	}
}

func TestForeachAtTheLimitRuns(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '[range(10000)]', max_concurrency: 3}\n", `{}`)
	if got := w.active(); len(got) != 3 {
		t.Errorf("active tasks %v, want 3", got)
	}
	if it := w.iterations("a"); it != (Iterations{Total: 10000, Running: 3}) {
		t.Errorf("iterations %+v", it)
	}
}

func TestForeachOverNothingCompletesAtOnce(t *testing.T) {
	w := started(t, `
name: f
steps:
  - {id: a, type: task, handler: h, foreach: '[]'}
  - {id: b, type: task, handler: h, depends_on: [a], input: '{{ .steps.a.output }}'}
`, `{}`)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepCompleted, "b": workflow.StepRunning})
	if got := string(w.step("a").Output); got != "[]" {
		t.Errorf("output %s, want []", got)
	}
	if it := w.iterations("a"); it != (Iterations{}) {
		t.Errorf("iterations %+v, want all zero", it)
	}
	// The dependent is scheduled in the same write, with the empty output.
	if b := w.tasks["b"]; b == nil || string(b.Input) != "[]" {
		t.Errorf("task of b: %+v, want one with input []", b)
	}
	only := startedAny(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '[]'}\n", `{}`)
	only.wantStatus(workflow.StatusCompleted)
	if ch, _ := testEnv().Start(only.c, &workflow.Instance{ID: "wf-2", Input: json.RawMessage(`{}`), State: only.c.Def.InitialState()}, t0); ch.Status != workflow.StatusRunning || ch.Settled != workflow.StatusCompleted {
		t.Errorf("start of an instance with nothing to run: %s then %q, want RUNNING then COMPLETED", ch.Status, ch.Settled)
	}
}

const imagesDef = `
name: f
steps:
  - id: resize
    type: task
    handler: resize
    foreach: .input.images
    max_concurrency: 2
    input: {image: '{{ .item.name }}', index: '{{ .index }}', of: '{{ .input.album }}'}
  - {id: after, type: task, handler: h, depends_on: [resize], input: '{{ .steps.resize.output }}'}
`

const imagesInput = `{"album":"x","images":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d"},{"name":"e"}]}`

func TestForeachBoundsConcurrencyAndOrdersOutputs(t *testing.T) {
	w := started(t, imagesDef, imagesInput)
	if got, want := w.active(), []string{iter("resize", 0), iter("resize", 1)}; !slices.Equal(got, want) {
		t.Fatalf("active after start %v, want %v", got, want)
	}
	if in := string(w.tasks[iter("resize", 1)].Input); in != `{"image":"b","index":1,"of":"x"}` {
		t.Errorf("input of iteration 1: %s", in)
	}
	w.deliver(iter("resize", 0))
	w.deliver(iter("resize", 1))
	// Finish in an order that is not the items': 1, then the next ones
	// as they come, 0 last.
	order := []int{1, 2, 3, 4, 0}
	for n, i := range order {
		if w.tasks[iter("resize", i)].Status == store.TaskQueued {
			w.deliver(iter("resize", i))
		}
		if _, err := w.completeKey(iter("resize", i), `{"out":"`+string(rune('a'+i))+`"}`); err != nil {
			t.Fatalf("completing iteration %d: %v", i, err)
		}
		active := 0
		for _, k := range w.active() {
			if strings.HasPrefix(k, "resize#") {
				active++
			}
		}
		if active > 2 {
			t.Fatalf("after %d completions %d iterations are delivered, want at most 2: %v", n+1, active, w.active())
		}
		if n < len(order)-1 {
			it := w.iterations("resize")
			if it.Completed != n+1 || it.Total != 5 || it.Running != active || it.Failed != 0 {
				t.Errorf("after %d completions iterations %+v (active %d)", n+1, it, active)
			}
		}
	}
	st := w.step("resize")
	want := `[{"out":"a"},{"out":"b"},{"out":"c"},{"out":"d"},{"out":"e"}]`
	if st.Status != workflow.StepCompleted || string(st.Output) != want {
		t.Errorf("step resize %s %s, want COMPLETED %s", st.Status, st.Output, want)
	}
	if _, kept := st.Extra[foreachKey]; kept {
		t.Errorf("the bookkeeping is kept after the step completed: %s", st.Extra[foreachKey])
	}
	if it := w.iterations("resize"); it != (Iterations{Total: 5, Completed: 5}) {
		t.Errorf("final iterations %+v", it)
	}
	if after := w.tasks["after"]; after == nil || string(after.Input) != want {
		t.Errorf("the dependent's task: %+v", after)
	}
}

func TestForeachWithoutBoundQueuesEveryIteration(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: http, foreach: '.input', request: {method: GET, url: 'http://x/{{ .item }}?i={{ .index }}'}}\n", `["p","q","r"]`)
	if got := w.active(); len(got) != 3 {
		t.Fatalf("active %v, want 3", got)
	}
	var req HTTPRequest
	if err := json.Unmarshal(w.tasks[iter("a", 2)].Input, &req); err != nil || req.URL != "http://x/r?i=2" || w.tasks[iter("a", 2)].Queue != store.QueueHTTP {
		t.Errorf("request of iteration 2: %+v (%v), queue %s", req, err, w.tasks[iter("a", 2)].Queue)
	}
}

func TestForeachIterationFailureCancelsTheRest(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input', retry: {max_attempts: 1}}\n", `[1,2,3]`)
	for i := range 3 {
		w.deliver(iter("a", i))
	}
	if _, err := w.completeKey(iter("a", 0), `"zero"`); err != nil {
		t.Fatal(err)
	}
	// Without the other rows the decision asks for them.
	task := w.tasks[iter("a", 1)]
	work := *w.inst
	work.State = w.inst.State.Clone()
	if _, err := w.env.FailTask(w.c, &work, task, task.Lease, "boom", true, w.now); !errors.Is(err, ErrNeedTasks) {
		t.Fatalf("failing without the rows: %v, want ErrNeedTasks", err)
	}
	ch := w.failKey(iter("a", 1), "boom")
	w.wantStatus(workflow.StatusFailed)
	if st := w.step("a"); st.Status != workflow.StepFailed || st.Error != "iteration 1: boom" {
		t.Errorf("step a: %s %q", st.Status, st.Error)
	}
	if got := w.tasks[iter("a", 2)].Status; got != store.TaskCancelled {
		t.Errorf("iteration 2's task is %s, want CANCELLED in the failing write", got)
	}
	if len(ch.Update) != 2 || ch.Update[0].Task.ID != task.ID {
		t.Errorf("updates %+v, want the failed task first and the cancelled one", ch.Update)
	}
	if it := w.iterations("a"); it != (Iterations{Total: 3, Completed: 1, Failed: 1}) {
		t.Errorf("iterations %+v", it)
	}
	// The cancelled iteration's late completion is refused.
	late := w.tasks[iter("a", 2)]
	if _, err := w.env.CompleteTask(w.c, w.inst, late, ch.Update[1].Task.Lease+"x", json.RawMessage(`1`), NextLease{}, w.now); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("late completion: %v, want ErrLeaseLost", err)
	}

	// Retry: the failed and the cancelled iterations run again with a
	// fresh budget, on their rows; the completed one is kept.
	if _, err := w.act("retry"); err != nil {
		t.Fatal(err)
	}
	if got, want := w.active(), []string{iter("a", 1), iter("a", 2)}; !slices.Equal(got, want) {
		t.Fatalf("active after retry %v, want %v", got, want)
	}
	if r := w.tasks[iter("a", 1)]; r.MaxAttempts != r.Attempt+1 || r.ID != task.ID {
		t.Errorf("retried row %+v: want the same row with one more attempt", r)
	}
	if it := w.iterations("a"); it != (Iterations{Total: 3, Completed: 1, Running: 2}) {
		t.Errorf("iterations after retry %+v", it)
	}
	for _, i := range []int{2, 1} {
		w.deliver(iter("a", i))
		if _, err := w.completeKey(iter("a", i), `"again"`); err != nil {
			t.Fatal(err)
		}
	}
	w.wantStatus(workflow.StatusCompleted)
	if got := string(w.step("a").Output); got != `["zero","again","again"]` {
		t.Errorf("output %s", got)
	}
}

func TestForeachRetryWithBoundRequeuesRowsAsSlotsFree(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input', max_concurrency: 1, retry: {max_attempts: 1}}\n", `[1,2,3]`)
	w.deliver(iter("a", 0))
	if _, err := w.completeKey(iter("a", 0), `0`); err != nil {
		t.Fatal(err)
	}
	w.deliver(iter("a", 1))
	w.failKey(iter("a", 1), "boom")
	if _, err := w.act("retry"); err != nil {
		t.Fatal(err)
	}
	if got := w.active(); !slices.Equal(got, []string{iter("a", 1)}) {
		t.Fatalf("active after retry %v, want iteration 1 alone", got)
	}
	w.deliver(iter("a", 1))
	if _, err := w.completeKey(iter("a", 1), `1`); err != nil {
		t.Fatal(err)
	}
	w.deliver(iter("a", 2))
	if _, err := w.completeKey(iter("a", 2), `2`); err != nil {
		t.Fatal(err)
	}
	if got := string(w.step("a").Output); got != `[0,1,2]` {
		t.Errorf("output %s", got)
	}
}

func TestForeachRetriesAnAttemptWithinTheIteration(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input', retry: {max_attempts: 2, initial_backoff: 1s}}\n", `[1,2]`)
	w.deliver(iter("a", 0))
	w.failKey(iter("a", 0), "flaky")
	if r := w.tasks[iter("a", 0)]; r.Status != store.TaskQueued || r.Attempt != 1 {
		t.Errorf("iteration 0 after one failure: %+v, want re-queued", r)
	}
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepRunning})
	w.now = w.now.Add(time.Minute)
	w.deliver(iter("a", 0))
	if got := w.tasks[iter("a", 0)].Attempt; got != 2 {
		t.Errorf("attempt %d, want 2", got)
	}
}

func TestForeachIterationTemplateMissingFailsTheStep(t *testing.T) {
	w := startedAny(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input', input: '{{ .item.name }}'}\n", `[{"name":"a"},3]`)
	w.wantStatus(workflow.StatusFailed)
	st := w.step("a")
	if st.Status != workflow.StepFailed || !strings.HasPrefix(st.Error, "iteration 1: missing reference {{ .item.name }}") {
		t.Errorf("step a: %s %q", st.Status, st.Error)
	}
	if len(w.tasks) != 0 {
		t.Errorf("tasks %v: the iteration queued before the failing one must not be", w.tasks)
	}
	// A retry renders them again: still missing, the step fails the same way.
	if _, err := w.act("retry"); err != nil {
		t.Fatal(err)
	}
	if st := w.step("a"); st.Status != workflow.StepFailed || !strings.HasPrefix(st.Error, "iteration 1: missing reference") || len(w.tasks) != 0 {
		t.Errorf("after retry: step %s %q, tasks %v", st.Status, st.Error, w.tasks)
	}
}

func TestForeachStepCompletedFromOutsideCancelsIterations(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input'}\n", `[1,2]`)
	w.deliver(iter("a", 0))
	p := ExternalCompletion{Step: "a", Output: json.RawMessage(`"manual"`)}
	if _, err := w.env.CompleteStep(w.c, w.inst, p, w.now); !errors.Is(err, ErrNeedTasks) {
		t.Fatalf("without the rows: %v, want ErrNeedTasks", err)
	}
	w.inst.State.Steps["a"].Status = workflow.StepRunning
	env := w.env
	env.Tasks = w.tasks
	ch, err := env.CompleteStep(w.c, w.inst, p, w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	if got := w.active(); len(got) != 0 {
		t.Errorf("active tasks %v, want both iterations cancelled", got)
	}
	w.wantStatus(workflow.StatusCompleted)
}

// A completion writes its iteration's output on its row and nothing of
// the others: the step's record holds no outputs, and only the last
// completion, which makes the step's output from every row, needs them.
func TestForeachOutputsLiveOnTheIterationsRows(t *testing.T) {
	w := started(t, "name: f\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input'}\n", `[1,2,3]`)
	for _, i := range []int{2, 0} {
		task := w.deliver(iter("a", i))
		ch, err := w.env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), NextLease{}, w.now)
		if err != nil {
			t.Fatalf("completing iteration %d without the other rows: %v", i, err)
		}
		w.apply(ch)
		if got := string(w.tasks[iter("a", i)].Output); got != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("iteration %d's row holds %q", i, got)
		}
		if fe := string(w.step("a").Extra[foreachKey]); strings.Contains(fe, `"i"`) || strings.Contains(fe, "outputs") {
			t.Errorf("the step's bookkeeping holds outputs: %s", fe)
		}
	}
	last := w.deliver(iter("a", 1))
	work := *w.inst
	work.State = w.inst.State.Clone()
	if _, err := w.env.CompleteTask(w.c, &work, last, last.Lease, json.RawMessage(`{"i":1}`), NextLease{}, w.now); !errors.Is(err, ErrNeedTasks) {
		t.Fatalf("the last completion without the rows: %v, want ErrNeedTasks", err)
	}
	if _, err := w.completeKey(iter("a", 1), `{"i":1}`); err != nil {
		t.Fatal(err)
	}
	if st := w.step("a"); st.Status != workflow.StepCompleted || string(st.Output) != `[{"i":0},{"i":1},{"i":2}]` {
		t.Errorf("step a %s %s, want COMPLETED with the outputs in item order", st.Status, st.Output)
	}
}
