package rules

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// smallObjects is an input {"xs": [{"a":1}, …]} of n objects: the shape
// whose decoded values cost the most per byte of text.
func smallObjects(n int) json.RawMessage {
	return json.RawMessage(`{"xs":[` + strings.TrimSuffix(strings.Repeat(`{"a":1},`, n), ",") + `]}`)
}

// startAllocs is the number of allocations of starting an instance of c
// with input, the median of a few.
func startAllocs(t *testing.T, c *Definition, input json.RawMessage) float64 {
	t.Helper()
	env := testEnv()
	env.Docs = workflow.NewDocGate(0)
	return testing.AllocsPerRun(3, func() {
		inst := &workflow.Instance{ID: "wf-1", Definition: c.Def.Name, Input: input, State: c.Def.InitialState()}
		if _, err := env.Start(c, inst, t0); err != nil {
			t.Fatal(err)
		}
	})
}

// The expressions of one decision — five `when`s and a foreach, all ready
// at start — read one document, decoded once: the decision allocates about
// what one `when` alone does, not six times it.
func TestExpressionsOfOneDecisionDecodeTheDocumentOnce(t *testing.T) {
	one := compileDef(t, `
name: one
steps:
  - {id: a, type: task, handler: h, when: '.input.xs | length > 0'}
`)
	six := compileDef(t, `
name: six
steps:
  - {id: a, type: task, handler: h, when: '.input.xs | length > 0'}
  - {id: b, type: task, handler: h, when: '.input.xs[0].a == 1'}
  - {id: c, type: task, handler: h, when: '.input.xs | length > 1'}
  - {id: d, type: task, handler: h, when: '.input.xs[1].a == 1'}
  - {id: e, type: task, handler: h, when: '.variables == {}'}
  - {id: f, type: task, handler: h, foreach: '.input.xs[0:2]'}
`)
	input := smallObjects(2000)
	a1, a6 := startAllocs(t, one, input), startAllocs(t, six, input)
	t.Logf("allocations of a start: %.0f with one when, %.0f with five and a foreach", a1, a6)
	if a1 < 2000*3 {
		t.Fatalf("a start with one when allocated %.0f times: it did not decode the input", a1)
	}
	if a6 > 1.5*a1 {
		t.Errorf("a start with five whens and a foreach allocated %.0f times, one when %.0f: the document was decoded more than once", a6, a1)
	}
}

// heldGate returns a gate whose whole first-come part the test holds (a
// document heavier than the gate's small ones waits for it) and its
// release.
func heldGate(t *testing.T) (*workflow.DocGate, func()) {
	t.Helper()
	g := workflow.NewDocGate(1 << 10) // a pool of 16 KiB, 12 KiB first come, first served
	release, err := g.Acquire(context.Background(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return g, release
}

// A decision waits for the node's gate before decoding its document; a
// wait that ends with the caller's context fails the evaluation saying
// so (the engine's write, under the same context, is not made). Once the
// gate has room, the same decision runs.
func TestDecisionWaitsForTheDocumentGate(t *testing.T) {
	c := compileDef(t, `
name: w
steps:
  - {id: a, type: task, handler: h, when: '.input.xs | length > 0'}
`)
	input := smallObjects(100) // about 38 KB decoded
	g, release := heldGate(t)
	env := testEnv()
	env.Docs = g
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	env.Ctx = ctx
	inst := &workflow.Instance{ID: "wf-1", Definition: "w", Input: input, State: c.Def.InitialState()}
	ch, err := env.Start(c, inst, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := "when: waiting for the memory to decode the instance's document (about 37762 bytes): context deadline exceeded"
	if st := ch.State.Steps["a"]; ch.Status != workflow.StatusFailed || st.Error != want {
		t.Fatalf("start while the gate was full: %s, step a %q\nwant FAILED, %q", ch.Status, st.Error, want)
	}

	release()
	env.Ctx = context.Background()
	inst = &workflow.Instance{ID: "wf-2", Definition: "w", Input: input, State: c.Def.InitialState()}
	if ch, err = env.Start(c, inst, t0); err != nil || ch.State.Steps["a"].Status != workflow.StepRunning {
		t.Fatalf("start once the gate had room: %v, %+v", err, ch.State.Steps["a"])
	}
	// The decision gave the weight back: the whole pool is free.
	free, cancelFree := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelFree()
	if r, err := g.Acquire(free, 1<<30); err != nil {
		t.Fatalf("the decision kept its weight: %v", err)
	} else {
		r()
	}
}

// A decision that evaluates nothing does not wait for the gate.
func TestDecisionWithoutExpressionsPassesAFullGate(t *testing.T) {
	w := &world{t: t, env: testEnv(), tasks: map[string]*store.Task{}, now: t0,
		c: compileDef(t, "name: w\nsteps:\n  - {id: a, type: task, handler: h}\n  - {id: b, type: task, handler: h, depends_on: [a]}\n")}
	g, release := heldGate(t)
	defer release()
	w.env.Docs = g
	w.inst = &workflow.Instance{ID: "wf-1", Definition: "w", Input: smallObjects(100), State: w.c.Def.InitialState()}
	ch, err := w.env.Start(w.c, w.inst, w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	w.deliver("a")
	w.complete("a", `{"ok":true}`)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepCompleted, "b": workflow.StepRunning})
}

// A step of a Serverless Workflow instance waits for the gate too: the
// machine decodes the input and the runtime. A wait that ends with the
// caller's context is the decision's error.
func TestServerlessStepWaitsForTheDocumentGate(t *testing.T) {
	c, err := Compile(&workflow.Definition{Name: "s", Serverless: json.RawMessage(`
document: {dsl: '1.0.0', namespace: test, name: s, version: '1.0.0'}
do:
  - count:
      set:
        n: '${ .xs | length }'
`)})
	if err != nil {
		t.Fatal(err)
	}
	g, release := heldGate(t)
	env := testEnv()
	env.Docs = g
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	env.Ctx = ctx
	inst := &workflow.Instance{ID: "s-1", Definition: "s", Input: smallObjects(100), State: c.Def.InitialState()}
	_, err = env.Start(c, inst, t0)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the memory to decode the instance's documents (about 37762 bytes)") {
		t.Fatalf("start while the gate was full: %v", err)
	}

	release()
	env.Ctx = context.Background()
	inst = &workflow.Instance{ID: "s-2", Definition: "s", Input: smallObjects(100), State: c.Def.InitialState()}
	ch, err := env.Start(c, inst, t0)
	if err != nil || len(ch.Insert) != 1 {
		t.Fatalf("start once the gate had room: %v, tasks %+v", err, ch.Insert)
	}
	inst.Status, inst.State = ch.Status, ch.State
	// Its tick resumes the machine, which waits for the gate as well.
	ch.Insert[0].Deliver("worker", env.NewID(), t0, time.Minute)
	tick := ch.Insert[0]
	g2, release2 := heldGate(t)
	env.Docs, env.Ctx = g2, ctx
	work := *inst // a decision that fails is thrown away with its copy
	work.State = inst.State.Clone()
	_, err = env.CompleteTask(c, &work, &tick, tick.Lease, nil, NextLease{}, t0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("resume while the gate was full: %v", err)
	}
	release2()
	env.Ctx = context.Background()
	done, err := env.CompleteTask(c, inst, &tick, tick.Lease, nil, NextLease{}, t0)
	if err != nil || done.Status != workflow.StatusCompleted || string(done.Output) != `{"n":100}` {
		t.Fatalf("resume once the gate had room: %v, %s %s", err, done.Status, done.Output)
	}
}

// A start whose three steps have a `when` on an ordinary small input: what
// the gate and the shared document add to (or save from) the hot path.
func BenchmarkStartWithWhens(b *testing.B) {
	def, err := workflow.ParseDefinition([]byte(`
name: w
steps:
  - {id: a, type: task, handler: h, when: '.input.order.total > 10'}
  - {id: b, type: task, handler: h, when: '.input.order.lines | length > 0'}
  - {id: c, type: task, handler: h, when: '.input.customer.tier == "gold"'}
`))
	if err != nil {
		b.Fatal(err)
	}
	c, err := Compile(def)
	if err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"order":{"id":"o-1","total":42.5,"lines":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}]},"customer":{"id":"c-9","tier":"gold","email":"x@example.com"}}`)
	env := testEnv()
	env.Docs = workflow.NewDocGate(0)
	b.ReportAllocs()
	for b.Loop() {
		inst := &workflow.Instance{ID: "wf-1", Definition: "w", Input: input, State: c.Def.InitialState()}
		if _, err := env.Start(c, inst, t0); err != nil {
			b.Fatal(err)
		}
	}
}
