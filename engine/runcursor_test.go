package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/internal/coderun"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// readCounter counts the engine's reads of each instance.
type readCounter struct {
	store.Backend
	mu    sync.Mutex
	reads map[string]int
}

func (r *readCounter) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	r.mu.Lock()
	r.reads[id]++
	r.mu.Unlock()
	return r.Backend.Get(ctx, id)
}

func (r *readCounter) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[id]
}

// A run's checkpoints and sets are decided on the instance as its last
// write left it: none reads the instance, whose read assembles every step
// recorded so far. A write of the instance by someone else in between
// (a pause, and the resume) makes the next checkpoint read and decide
// again, and it is recorded all the same, once.
func TestCheckpointsReadNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		rc := &readCounter{reads: map[string]int{}}
		n := newNode(t, b, b.newDB(t), nodeOpts{wrap: func(st store.Backend) store.Backend { rc.Backend = st; return rc }})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "o1", `{}`)
		run := w.run(5 * time.Second)
		before := rc.count("o1")
		const steps = 20
		for i := range steps {
			w.step(run, fmt.Sprintf("s%02d", i), rules.Recorded{Output: json.RawMessage(fmt.Sprint(i))})
		}
		if err := n.eng.SetVariable(t.Context(), run.ID, run.Lease, "k", json.RawMessage(`"v"`)); err != nil {
			t.Fatal(err)
		}
		// A recorded step asked for again is answered from the cursor too.
		if again := w.step(run, "s00", rules.Recorded{Output: json.RawMessage(`99`)}); string(again.Output) != `0` {
			t.Errorf("s00 again = %s, want the recorded 0", again.Output)
		}
		if got := rc.count("o1") - before; got != 0 {
			t.Errorf("%d checkpoints and a set read the instance %d times, want 0", steps, got)
		}

		if _, err := n.eng.Transition(t.Context(), "o1", workflow.StatusRunning, workflow.StatusPaused); err != nil {
			t.Fatal(err)
		}
		// Decided on the cursor, the write conflicts with the pause: read
		// and decided again on the PAUSED instance, it is recorded.
		paused := w.step(run, "while-paused", rules.Recorded{Output: json.RawMessage(`"p"`)})
		if paused.Status != workflow.StepCompleted || string(paused.Extra["seq"]) != fmt.Sprint(steps+1) {
			t.Errorf("while-paused = %+v", paused)
		}
		if _, err := n.eng.Transition(t.Context(), "o1", workflow.StatusPaused, workflow.StatusRunning); err != nil {
			t.Fatal(err)
		}
		w.step(run, "after", rules.Recorded{Output: json.RawMessage(`"a"`)})

		inst, err := n.st.Get(t.Context(), "o1")
		if err != nil {
			t.Fatal(err)
		}
		if len(inst.State.Steps) != steps+2 || string(inst.State.Variables["k"]) != `"v"` {
			t.Fatalf("state: %d steps, variables %s", len(inst.State.Steps), inst.State.Variables)
		}
		for i := range steps {
			st := inst.State.Steps[fmt.Sprintf("s%02d", i)]
			if st == nil || string(st.Output) != fmt.Sprint(i) || string(st.Extra["seq"]) != fmt.Sprint(i+1) {
				t.Errorf("s%02d = %+v", i, st)
			}
		}
		// A version per write, each with its history row: the steps, the
		// set, the pause, the checkpoint while paused, the resume, the
		// last checkpoint.
		if want := int64(steps + 5); inst.Version != want {
			t.Errorf("version %d, want %d", inst.Version, want)
		}
		h, err := n.st.History(t.Context(), "o1", 0, 0)
		if err != nil || int64(len(h)) != inst.Version+1 {
			t.Fatalf("history: %d rows, %v; want %d", len(h), err, inst.Version+1)
		}
		for i, v := range h {
			if v.Version != int64(i) {
				t.Fatalf("history row %d is version %d", i, v.Version)
			}
		}
		if h[steps+1].Cause != `variable "k" set` || h[steps+3].Cause != `step "while-paused" completed` {
			t.Errorf("causes: %q, %q", h[steps+1].Cause, h[steps+3].Cause)
		}
	})
}

// A checkpoint decided on the run's cursor measures the state from the
// length its last write stored: it is refused exactly when the state
// with its record would be larger than the limit, and nothing of it is
// written.
func TestCheckpointOnTheCursorKeepsTheStateLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const limit = 8 << 10
		n := newNode(t, b, b.newDB(t), nodeOpts{maxState: limit})
		n.define(orderCode)
		w := codeWorker{t: t, n: n}
		n.start("order", "o1", `{}`)
		run := w.run(5 * time.Second)
		out := json.RawMessage(`"` + strings.Repeat("x", 300) + `"`)
		var refused string
		for i := range 100 {
			name := fmt.Sprintf("s%02d", i)
			_, err := n.eng.Checkpoint(t.Context(), run.ID, run.Lease, name, rules.Recorded{Output: out})
			if errors.Is(err, workflow.ErrStateTooLarge) {
				refused = name
				break
			}
			if err != nil {
				t.Fatalf("checkpoint %s: %v", name, err)
			}
		}
		if refused == "" {
			t.Fatal("no checkpoint was refused")
		}
		inst, err := n.st.Get(t.Context(), "o1")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := inst.State.Steps[refused]; ok {
			t.Fatalf("the refused %s was recorded", refused)
		}
		stored, _ := inst.State.MarshalJSON()
		with := inst.State.Clone()
		with.Steps[refused] = &workflow.StepState{Status: workflow.StepCompleted, Output: out, Attempts: 1,
			Extra: map[string]json.RawMessage{"kind": json.RawMessage(`"step"`), "seq": json.RawMessage(fmt.Sprint(len(inst.State.Steps) + 1))}}
		more, _ := with.MarshalJSON()
		if len(stored) > limit || len(more) <= limit {
			t.Errorf("%s refused with the state at %d bytes, %d with it; the limit is %d", refused, len(stored), len(more), limit)
		}
	})
}

// A code workflow run in process reads its instance neither for its
// checkpoints nor for its completion: each is decided on the instance as
// the write before it left it.
func TestInProcessCodeWorkflowReadsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		rc := &readCounter{reads: map[string]int{}}
		n := newNode(t, b, b.newDB(t), nodeOpts{noStart: true, wrap: func(st store.Backend) store.Backend { rc.Backend = st; return rc }})
		flow := worker.Workflow{Run: worker.Func(func(wf *worker.WorkflowContext, in int) (int, error) {
			sum := in
			for i := range 5 {
				v, err := worker.Step(wf, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		})}
		def, err := flow.Definition("sum")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := n.eng.PutDefinition(t.Context(), def); err != nil {
			t.Fatal(err)
		}
		n.eng.Register("sum", worker.WorkflowHandler(flow, coderun.Backend(n.eng)))
		if err := n.eng.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.eng.Stop)
		n.start("sum", "s1", `100`)
		done := n.waitStatus("s1", workflow.StatusCompleted, 10*time.Second)
		if string(done.Output) != `110` || len(done.State.Steps) != 5 || done.Version != 6 {
			t.Errorf("completed at version %d with output %s and %d steps; want 6, 110, 5", done.Version, done.Output, len(done.State.Steps))
		}
		if got := rc.count("s1"); got != 0 {
			t.Errorf("the engine read the instance %d times, want 0", got)
		}
	})
}
