package rules

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

func TestWhenDecidesWhetherAReadyStepRuns(t *testing.T) {
	const def = `
name: w
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a], when: '.input.go and .steps.a.output.ok'}
  - {id: c, type: task, handler: h, depends_on: [b]}
`
	for _, tc := range []struct {
		name, input, aOut string
		want              map[string]workflow.StepStatus
		status            workflow.Status
		errText           string
	}{
		{name: "truthy runs", input: `{"go": true}`, aOut: `{"ok": 1}`,
			want: map[string]workflow.StepStatus{"b": workflow.StepRunning, "c": workflow.StepPending}, status: workflow.StatusRunning},
		{name: "falsy skips, and the skip propagates", input: `{"go": true}`, aOut: `{"ok": false}`,
			want: map[string]workflow.StepStatus{"b": workflow.StepSkipped, "c": workflow.StepSkipped}, status: workflow.StatusCompleted},
		{name: "null skips", input: `{}`, aOut: `{"ok": 1}`,
			want: map[string]workflow.StepStatus{"b": workflow.StepSkipped, "c": workflow.StepSkipped}, status: workflow.StatusCompleted},
		{name: "an evaluation error fails the step and the instance", input: `{"go": 5}`, aOut: `7`,
			want:   map[string]workflow.StepStatus{"b": workflow.StepFailed, "c": workflow.StepPending},
			status: workflow.StatusFailed, errText: "when: expected an object but got: number (7)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := started(t, def, tc.input)
			w.deliver("a")
			w.complete("a", tc.aOut)
			w.wantSteps(tc.want)
			w.wantStatus(tc.status)
			b := w.step("b")
			if b.Error != tc.errText {
				t.Errorf("b's error = %q, want %q", b.Error, tc.errText)
			}
			if tc.want["b"] == workflow.StepSkipped {
				if w.tasks["b"] != nil || b.Attempts != 0 || string(b.Output) != "null" {
					t.Errorf("a skipped step has no task, no attempt, output null: task %+v, step %+v", w.tasks["b"], b)
				}
			}
			if tc.errText != "" && w.tasks["b"] != nil {
				t.Errorf("a step whose when failed got a task: %+v", w.tasks["b"])
			}
		})
	}
}

// TestWhenBoundedByTheStateLimit: a when that would build a value larger
// than the state limit (the environment's MaxStateBytes) fails its step,
// and so the instance, with an error naming the expression and the limit,
// before the memory is taken.
func TestWhenBoundedByTheStateLimit(t *testing.T) {
	for _, tc := range []struct {
		when     string
		maxState int
		want     string
	}{
		{`("x"*1e9) as $a | ($a+$a+$a+$a)`, 0,
			`when: expression "(\"x\"*1e9) as $a | ($a+$a+$a+$a)": ` + "`*`" + ` would build a value of 1000000002 bytes, over --max-state-bytes (4194304 bytes)`},
		{`("x" * 2147483000) | length > 0`, 0,
			`when: expression "(\"x\" * 2147483000) | length > 0": ` + "`*`" + ` would build a value of 2147483002 bytes, over --max-state-bytes (4194304 bytes)`},
		{`.input.s * 1000 | length > 0`, 5000,
			`when: expression ".input.s * 1000 | length > 0": ` + "`*`" + ` would build a value of 10002 bytes, over --max-state-bytes (5000 bytes)`},
	} {
		t.Run(tc.when, func(t *testing.T) {
			w := &world{t: t, env: testEnv(), tasks: map[string]*store.Task{}, now: t0,
				c: compileDef(t, "name: w\nsteps:\n  - {id: a, type: task, handler: h, when: '"+tc.when+"'}\n")}
			w.env.MaxStateBytes = tc.maxState
			w.inst = &workflow.Instance{ID: "wf-1", Definition: "w", Input: json.RawMessage(`{"s": "0123456789"}`), State: w.c.Def.InitialState()}
			ch, err := w.env.Start(w.c, w.inst, w.now)
			if err != nil {
				t.Fatal(err)
			}
			w.apply(ch)
			w.wantStatus(workflow.StatusFailed)
			if st := w.step("a"); st.Status != workflow.StepFailed || st.Error != tc.want {
				t.Errorf("step a: %s %q\nwant FAILED %q", st.Status, st.Error, tc.want)
			}
			if len(w.tasks) != 0 {
				t.Errorf("tasks %v, want none", w.tasks)
			}
		})
	}
}

func TestWhenOnARootStepIsEvaluatedAtStart(t *testing.T) {
	w := started(t, `
name: w
steps:
  - {id: a, type: task, handler: h, when: '.variables.x == null and .input.run'}
  - {id: b, type: wait, when: '.steps.a.status == "SKIPPED"'}
`, `{"run": false}`)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepSkipped, "b": workflow.StepWaiting})
	if len(w.tasks) != 0 {
		t.Errorf("tasks: %+v", w.tasks)
	}
}

func TestJoinVerdicts(t *testing.T) {
	const (
		P = workflow.StepPending
		R = workflow.StepRunning
		C = workflow.StepCompleted
		S = workflow.StepSkipped
		F = workflow.StepFailed
	)
	for _, tc := range []struct {
		join workflow.Join
		deps []workflow.StepStatus
		want joinVerdict
	}{
		{"", []workflow.StepStatus{C, C}, joinReady},
		{"", []workflow.StepStatus{C, R}, joinWaiting},
		{"", []workflow.StepStatus{S, R}, joinSkipped},
		{"", []workflow.StepStatus{C, S}, joinSkipped},
		{workflow.JoinAll, []workflow.StepStatus{C, C, C}, joinReady},
		{workflow.JoinAll, []workflow.StepStatus{F, C}, joinWaiting},
		{workflow.JoinAny, []workflow.StepStatus{C, R}, joinWaiting},
		{workflow.JoinAny, []workflow.StepStatus{C, S}, joinReady},
		{workflow.JoinAny, []workflow.StepStatus{S, S}, joinSkipped},
		{workflow.JoinAny, []workflow.StepStatus{S, P}, joinWaiting},
		{workflow.JoinFirst, []workflow.StepStatus{C, R}, joinReady},
		{workflow.JoinFirst, []workflow.StepStatus{S, R}, joinWaiting},
		{workflow.JoinFirst, []workflow.StepStatus{S, S}, joinSkipped},
		{workflow.JoinFirst, []workflow.StepStatus{P, P}, joinWaiting},
	} {
		s := &workflow.Step{ID: "x", Join: tc.join}
		steps := map[string]*workflow.StepState{}
		for i, st := range tc.deps {
			id := string(rune('a' + i))
			s.DependsOn = append(s.DependsOn, id)
			steps[id] = &workflow.StepState{Status: st}
		}
		if got := joinOf(s, steps); got != tc.want {
			t.Errorf("join %q over %v = %d, want %d", tc.join, tc.deps, got, tc.want)
		}
	}
	// A dependency missing from the state has not finished.
	s := &workflow.Step{ID: "x", DependsOn: []string{"gone"}, Join: workflow.JoinAny}
	if got := joinOf(s, map[string]*workflow.StepState{}); got != joinWaiting {
		t.Errorf("a missing dependency: %d", got)
	}
}

func TestJoinAnyRunsWhenOneCompletedAndSkipsWhenNone(t *testing.T) {
	const def = `
name: any
steps:
  - {id: a, type: task, handler: h, when: '.input.a'}
  - {id: b, type: task, handler: h, when: '.input.b'}
  - {id: c, type: task, handler: h, depends_on: [a, b], join: any, input: {a: "{{ .steps.a.output }}", b: "{{ .steps.b.output }}"}}
`
	w := started(t, def, `{"a": true, "b": false}`)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepSkipped, "c": workflow.StepPending})
	w.deliver("a")
	w.complete("a", `"A"`)
	w.wantSteps(map[string]workflow.StepStatus{"c": workflow.StepRunning})
	// A skipped step's output renders as null.
	if got := string(w.tasks["c"].Input); got != `{"a":"A","b":null}` {
		t.Errorf("c's input = %s", got)
	}

	// Nothing runs: the instance completes at start, in the same write.
	c := compileDef(t, def)
	inst := &workflow.Instance{ID: "x", Input: json.RawMessage(`{"a": false, "b": false}`), State: c.Def.InitialState()}
	ch, err := testEnv().Start(c, inst, t0)
	if err != nil || ch.Status != workflow.StatusRunning || ch.Settled != workflow.StatusCompleted || len(ch.Insert) != 0 || string(ch.Output) != `{}` {
		t.Fatalf("start with every step skipped: %+v, %v", ch, err)
	}
	for id, st := range ch.State.Steps {
		if st.Status != workflow.StepSkipped {
			t.Errorf("step %s is %s, want SKIPPED", id, st.Status)
		}
	}
}

// applyUpdates writes the updates of ch alone, as the caller's completion
// of a change already applied (CancelWithdrawn) does.
func (w *world) applyUpdates(ch Change) {
	for _, u := range ch.Update {
		w.tasks[u.Task.StepID] = &u.Task
	}
}

const raceDef = `
name: race
steps:
  - {id: pre, type: task, handler: h}
  - {id: fast, type: task, handler: h}
  - {id: approve, type: wait}
  - {id: timer, type: sleep, duration: 1h}
  - {id: slow, type: task, handler: h, depends_on: [pre]}
  - {id: win, type: task, handler: h, depends_on: [fast, approve, timer, slow], join: first, input: "{{ .steps.fast.output }}"}
  - {id: after, type: task, handler: h, depends_on: [timer]}
`

func TestJoinFirstWithdrawsTheUnfinishedDependencies(t *testing.T) {
	w := started(t, raceDef, `{}`)
	w.deliver("pre")
	w.deliver("fast")
	timerTask := w.tasks["timer"]
	ch := w.complete("fast", `"won"`)
	w.wantSteps(map[string]workflow.StepStatus{
		"win": workflow.StepRunning, "approve": workflow.StepSkipped, "timer": workflow.StepSkipped,
		"slow": workflow.StepSkipped, // PENDING: withdrawn too
		"pre":  workflow.StepRunning, // not a dependency of win: only the dependencies are withdrawn
		// after depended on the withdrawn timer (join all): the skip propagates.
		"after": workflow.StepSkipped,
	})
	if string(w.tasks["win"].Input) != `"won"` {
		t.Errorf("win's input = %s", w.tasks["win"].Input)
	}
	// The completion was not given the timer's task row: the caller must
	// cancel it in the same write.
	if !slices.Equal(ch.Withdrawn, []string{"timer"}) {
		t.Fatalf("Withdrawn = %v, want [timer]", ch.Withdrawn)
	}
	cancels := Change{Withdrawn: ch.Withdrawn}
	cancels.CancelWithdrawn([]store.Task{*timerTask, *w.tasks["pre"], *w.tasks["fast"]})
	if len(cancels.Update) != 1 || cancels.Update[0].Task.StepID != "timer" || cancels.Update[0].Task.Status != store.TaskCancelled {
		t.Errorf("cancels: %+v, want the timer's task only", cancels.Update)
	}
	w.applyUpdates(cancels)
	// A withdrawn wait step takes no completion.
	if _, err := w.env.CompleteStep(w.c, w.inst, ExternalCompletion{Step: "approve"}, w.now); !errors.Is(err, ErrStepNotReady) {
		t.Errorf("completing the withdrawn wait step: %v, want ErrStepNotReady", err)
	}
	w.deliver("win")
	w.complete("win", `1`)
	w.wantStatus(workflow.StatusRunning) // pre still runs
	w.complete("pre", `2`)
	w.wantStatus(workflow.StatusCompleted)
}

func TestJoinFirstWithdrawsALeasedTaskWhoseLateCompletionIsRefused(t *testing.T) {
	w := started(t, `
name: race
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h}
  - {id: c, type: task, handler: h, depends_on: [a, b], join: first}
`, `{}`)
	w.deliver("a")
	b := *w.deliver("b")
	ch := w.complete("a", `1`)
	cancels := Change{Withdrawn: ch.Withdrawn}
	cancels.CancelWithdrawn([]store.Task{b})
	if len(cancels.Update) != 1 || cancels.Update[0].Task.ID != b.ID || cancels.Update[0].Task.Status != store.TaskCancelled || cancels.Update[0].Task.Lease != "" {
		t.Fatalf("cancels: %+v", cancels.Update)
	}
	w.applyUpdates(cancels)
	w.wantSteps(map[string]workflow.StepStatus{"b": workflow.StepSkipped, "c": workflow.StepRunning})
	late := w.tasks["b"]
	if _, err := w.env.CompleteTask(w.c, w.inst, late, b.Lease, json.RawMessage(`2`), NextLease{}, w.now); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("late completion of the withdrawn task: %v, want ErrLeaseLost", err)
	}
	// Even against the row as it was (a completion racing the write), the
	// instance's side of the fence refuses it.
	if _, err := w.env.CompleteTask(w.c, w.inst, &b, b.Lease, json.RawMessage(`2`), NextLease{}, w.now); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("completion against the stale row: %v, want ErrLeaseLost", err)
	}
}

func TestJoinFirstOnResumeCancelsTheTasksItIsGiven(t *testing.T) {
	w := started(t, `
name: race
steps:
  - {id: a, type: task, handler: h}
  - {id: t, type: sleep, duration: 1h}
  - {id: c, type: task, handler: h, depends_on: [a, t], join: first}
`, `{}`)
	w.deliver("a")
	if _, err := w.act("pause"); err != nil {
		t.Fatal(err)
	}
	w.complete("a", `1`) // recorded while paused; nothing scheduled
	w.wantSteps(map[string]workflow.StepStatus{"c": workflow.StepPending, "t": workflow.StepRunning})
	ch, err := w.act("resume")
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Withdrawn) != 0 || w.tasks["t"].Status != store.TaskCancelled {
		t.Errorf("resume: withdrawn %v, timer task %+v", ch.Withdrawn, w.tasks["t"])
	}
	w.wantSteps(map[string]workflow.StepStatus{"c": workflow.StepRunning, "t": workflow.StepSkipped})
}

func TestSkippedStepReferences(t *testing.T) {
	w := started(t, `
name: refs
steps:
  - {id: s, type: task, handler: h, when: 'false'}
  - {id: whole, type: task, handler: h, depends_on: [s], join: any, input: {v: "{{ .steps.s.output }}"}}
  - {id: a, type: task, handler: h}
  - {id: deep, type: task, handler: h, depends_on: [a, s], join: any, input: "{{ .steps.s.output.k }}"}
`, `{}`)
	w.wantSteps(map[string]workflow.StepStatus{"s": workflow.StepSkipped, "whole": workflow.StepSkipped})
	w.deliver("a")
	w.complete("a", `1`)
	deep := w.step("deep")
	if deep.Status != workflow.StepFailed || !strings.Contains(deep.Error, "{{ .steps.s.output.k }}") || !strings.Contains(deep.Error, "missing reference") {
		t.Errorf("deep: %+v, want FAILED naming the reference", deep)
	}
	w.wantStatus(workflow.StatusFailed)
}

func TestSkippedReferenceRendersNull(t *testing.T) {
	w := started(t, `
name: refs
steps:
  - {id: s, type: task, handler: h, when: 'false'}
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a, s], join: any, input: {v: "{{ .steps.s.output }}", t: "x{{ .steps.s.output }}"}}
`, `{}`)
	w.deliver("a")
	w.complete("a", `1`)
	if got := string(w.tasks["b"].Input); got != `{"t":"xnull","v":null}` {
		t.Errorf("b's input = %s", got)
	}
}

func TestInstanceOutput(t *testing.T) {
	const steps = `
steps:
  - {id: a, type: task, handler: h}
  - {id: s, type: task, handler: h, when: 'false'}
  - {id: b, type: task, handler: h, depends_on: [a]}
  - {id: c, type: task, handler: h, depends_on: [a]}
  - {id: d, type: task, handler: h, depends_on: [a, s], join: any}
`
	for _, tc := range []struct {
		name, output, want, note string
		status                   workflow.Status
	}{
		// Default: the COMPLETED steps no other step depends on (s is
		// SKIPPED, a has dependents).
		{name: "default", want: `{"b":"B","c":"C","d":"D"}`, status: workflow.StatusCompleted},
		{name: "template", output: `{total: "{{ .steps.b.output }}", in: "{{ .input.n }}", skipped: "{{ .steps.s.output }}", n: 1}`,
			want: `{"in":5,"n":1,"skipped":null,"total":"B"}`, status: workflow.StatusCompleted},
		{name: "render failure fails the instance", output: `"{{ .steps.s.output.k }}"`,
			status: workflow.StatusFailed, note: "; the workflow output failed to render: missing reference {{ .steps.s.output.k }}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := "name: out\n" + steps
			if tc.output != "" {
				def += "output: " + tc.output + "\n"
			}
			w := started(t, def, `{"n": 5}`)
			w.deliver("a")
			w.complete("a", `"A"`)
			for _, id := range []string{"b", "c"} {
				w.deliver(id)
				ch := w.complete(id, `"`+strings.ToUpper(id)+`"`)
				if ch.Output != nil {
					t.Fatalf("output before the instance completes: %s", ch.Output)
				}
			}
			w.deliver("d")
			ch := w.complete("d", `"D"`)
			w.wantStatus(tc.status)
			if string(ch.Output) != tc.want {
				t.Errorf("output = %s, want %s", ch.Output, tc.want)
			}
			if !strings.HasPrefix(ch.Note, tc.note) || (tc.note == "") != (ch.Note == "") {
				t.Errorf("note = %q, want %q…", ch.Note, tc.note)
			}
		})
	}
}

func TestOutputOfAnInstanceCompletingOnResume(t *testing.T) {
	w := started(t, `
name: out
steps:
  - {id: a, type: task, handler: h}
output: {a: "{{ .steps.a.output }}"}
`, `{}`)
	w.deliver("a")
	if _, err := w.act("pause"); err != nil {
		t.Fatal(err)
	}
	w.complete("a", `7`)
	w.wantStatus(workflow.StatusPaused)
	ch, err := w.act("resume")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Settled != workflow.StatusCompleted || string(ch.Output) != `{"a":7}` {
		t.Errorf("resume: settled %q, output %s", ch.Settled, ch.Output)
	}
}

func TestCompiledDefinitionRejectsABadWhen(t *testing.T) {
	// Validate rejects it first; Compile, given a definition that skipped
	// validation, says where it is.
	def := &workflow.Definition{Name: "x", Steps: []workflow.Step{{ID: "a", Type: workflow.StepTypeWait, When: ".["}}}
	if _, err := Compile(def); err == nil || !strings.Contains(err.Error(), "step a when:") {
		t.Errorf("Compile: %v", err)
	}
}

// TestTemplatesBoundedByTheStateLimit: a template that names a large value
// many times fails where it renders, past the state limit (the
// environment's MaxStateBytes): the workflow output fails the instance, a
// step's input fails the step, an event key is too long.
func TestTemplatesBoundedByTheStateLimit(t *testing.T) {
	refs := func(ref string, n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`k` + strconv.Itoa(i) + `: "{{ ` + ref + ` }}"`)
		}
		return b.String() + "}"
	}
	input := `{"big": "` + strings.Repeat("x", 10_000) + `"}`
	const tooMuch = "the template renders too much: more than 100000 bytes (--max-state-bytes)"
	start := func(t *testing.T, def string) *world {
		t.Helper()
		w := &world{t: t, env: testEnv(), tasks: map[string]*store.Task{}, now: t0, c: compileDef(t, def)}
		w.env.MaxStateBytes = 100_000
		w.inst = &workflow.Instance{ID: "wf-1", Definition: w.c.Def.Name, Input: json.RawMessage(input), State: w.c.Def.InitialState()}
		ch, err := w.env.Start(w.c, w.inst, w.now)
		if err != nil {
			t.Fatal(err)
		}
		w.apply(ch)
		return w
	}

	w := start(t, "name: out\nsteps:\n  - {id: a, type: task, handler: h}\noutput: "+refs(".input.big", 100)+"\n")
	w.deliver("a")
	ch := w.complete("a", `1`)
	w.wantStatus(workflow.StatusFailed)
	if ch.Note != "; the workflow output failed to render: "+tooMuch {
		t.Errorf("output: note %q", ch.Note)
	}

	w = start(t, "name: in\nsteps:\n  - {id: a, type: task, handler: h, input: "+refs(".input.big", 100)+"}\n")
	if st := w.step("a"); st.Status != workflow.StepFailed || st.Error != tooMuch {
		t.Errorf("input: step %s %q", st.Status, st.Error)
	}

	w = start(t, "name: key\nsteps:\n  - {id: a, type: wait, event: e, key: '"+strings.Repeat("{{ .input.big }}", 100)+"'}\n")
	if st := w.step("a"); st.Status != workflow.StepFailed || st.Error != "key: the rendered key is longer than 256 characters" {
		t.Errorf("event key: step %s %q", st.Status, st.Error)
	}
}
