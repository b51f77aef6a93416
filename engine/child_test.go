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

const (
	lineDef = `
name: line
steps:
  - {id: price, type: task, handler: echo, input: {sku: "{{ .input.sku }}", qty: "{{ .input.qty }}"}}
  - {id: total, type: task, handler: echo, depends_on: [price], input: {sku: "{{ .steps.price.output.sku }}"}}
`
	orderDef = `
name: order
steps:
  - {id: line, type: workflow, definition: line, input: {sku: "{{ .input.sku }}", qty: 2}}
  - {id: ship, type: task, handler: echo, depends_on: [line], input: "{{ .steps.line.output }}"}
`
)

// children lists the child workflows of id.
func (n *node) children(id string) []*workflow.Instance {
	n.t.Helper()
	page, err := n.st.List(context.Background(), store.ListParams{Parent: id})
	if err != nil {
		n.t.Fatal(err)
	}
	return page.Instances
}

func TestChildWorkflowCompletesParentStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo}})
		n.define(lineDef)
		n.define(orderDef)
		inst := n.start("order", "o1", `{"sku": "x-1"}`)
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		kids := n.children(inst.ID)
		if len(kids) != 1 {
			t.Fatalf("children of o1: %d, want 1", len(kids))
		}
		child := kids[0]
		if child.Status != workflow.StatusCompleted || child.Definition != "line" || string(child.Input) != `{"qty":2,"sku":"x-1"}` {
			t.Fatalf("child: %s %s input %s", child.Status, child.Definition, child.Input)
		}
		if p := child.Parent; p == nil || p.WorkflowID != "o1" || p.Step != "line" || p.Index != nil {
			t.Fatalf("child's parent: %+v", p)
		}
		if got := done.State.Steps["line"].Child(); got != child.ID {
			t.Fatalf("state.steps.line.child = %q, want %q", got, child.ID)
		}
		if got, want := output(t, done, "line"), `{"total":{"sku":"x-1"}}`; got != want {
			t.Fatalf("line output %s, want %s", got, want)
		}
		if got := output(t, done, "ship"); got != `{"total":{"sku":"x-1"}}` {
			t.Fatalf("ship output %s", got)
		}
		n.checkHistory(done)
		h := n.checkHistory(child)
		completions := 0
		for _, e := range n.checkHistory(done) {
			if strings.Contains(e.Cause, `step "line" completed`) {
				completions++
			}
		}
		if completions != 1 || len(h) == 0 {
			t.Fatalf("the parent's step completed %d times, want once", completions)
		}
		// The instance JSON names the parent.
		raw, _ := json.Marshal(child)
		if !strings.Contains(string(raw), `"parent":{"workflow_id":"o1","step":"line"}`) {
			t.Fatalf("child JSON: %s", raw)
		}
		if others := n.children(child.ID); len(others) != 0 {
			t.Fatalf("the child has %d children", len(others))
		}
	})
}

func TestChildFailureRetriesWithNewChild(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		fail := func(context.Context, engine.Task) (json.RawMessage, error) {
			return nil, engine.Permanent(errors.New("out of stock"))
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"fail": fail}})
		n.define("name: broken\nsteps:\n  - {id: a, type: task, handler: fail}\n")
		n.define("name: retrying\nsteps:\n  - {id: sub, type: workflow, definition: broken, retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms}}\n")
		inst := n.start("retrying", "r1", "")
		failed := n.waitStatus(inst.ID, workflow.StatusFailed, 10*time.Second)
		kids := n.children(inst.ID)
		if len(kids) != 2 {
			t.Fatalf("children: %d, want 2 (one per attempt)", len(kids))
		}
		st := failed.State.Steps["sub"]
		if st.Attempts != 2 || st.Status != workflow.StepFailed {
			t.Fatalf("step sub: %s after %d attempts", st.Status, st.Attempts)
		}
		// Newest first: the second attempt's child is the one recorded.
		if st.Child() != kids[0].ID || kids[0].ID == kids[1].ID {
			t.Fatalf("step child %q, children %s, %s", st.Child(), kids[0].ID, kids[1].ID)
		}
		if !strings.Contains(st.Error, kids[0].ID) || !strings.Contains(st.Error, "FAILED") {
			t.Fatalf("step error %q", st.Error)
		}
		for _, k := range kids {
			if k.Status != workflow.StatusFailed {
				t.Fatalf("child %s is %s", k.ID, k.Status)
			}
		}
		n.checkHistory(failed)
	})
}

func TestChildUnknownDefinitionFailsStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: orphan\nsteps:\n  - {id: sub, type: workflow, definition: nowhere, retry: {max_attempts: 3}}\n")
		inst := n.start("orphan", "u1", "")
		failed := n.waitStatus(inst.ID, workflow.StatusFailed, 10*time.Second)
		st := failed.State.Steps["sub"]
		if st.Attempts != 1 || !strings.Contains(st.Error, `"nowhere" does not exist`) {
			t.Fatalf("step sub: %d attempts, error %q", st.Attempts, st.Error)
		}
		if kids := n.children(inst.ID); len(kids) != 0 {
			t.Fatalf("%d children started", len(kids))
		}
	})
}

func TestCancelParentCancelsDescendants(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: middle\nsteps:\n  - {id: sub, type: workflow, definition: leaf}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: middle}\n")
		inst := n.start("top", "t1", "")
		var grandchild *workflow.Instance
		deadline := time.Now().Add(10 * time.Second)
		for grandchild == nil {
			if kids := n.children(inst.ID); len(kids) == 1 {
				if gk := n.children(kids[0].ID); len(gk) == 1 && gk[0].State.Steps["approve"].Status == workflow.StepWaiting {
					grandchild = gk[0]
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the grandchild did not start")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := n.eng.Action(context.Background(), inst.ID, "cancel"); err != nil {
			t.Fatal(err)
		}
		child := n.children(inst.ID)[0]
		for _, id := range []string{inst.ID, child.ID, grandchild.ID} {
			got := n.waitStatus(id, workflow.StatusCancelled, 5*time.Second)
			n.checkHistory(got)
		}
	})
}

func TestChildNestingDepthLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: again\nsteps:\n  - {id: sub, type: workflow, definition: again, retry: {max_attempts: 1}}\n")
		inst := n.start("again", "d0", "")
		n.waitStatus(inst.ID, workflow.StatusFailed, 20*time.Second)
		// Follow the chain down: ten levels of children, the last one
		// failed because it may not start an eleventh.
		id, depth := inst.ID, 0
		var last *workflow.Instance
		for {
			kids := n.children(id)
			if len(kids) == 0 {
				break
			}
			if len(kids) != 1 {
				t.Fatalf("workflow %s has %d children", id, len(kids))
			}
			last, id, depth = kids[0], kids[0].ID, depth+1
		}
		if depth != 10 {
			t.Fatalf("children nested %d levels deep, want 10", depth)
		}
		if last.Status != workflow.StatusFailed {
			t.Fatalf("the deepest child is %s", last.Status)
		}
		if e := last.State.Steps["sub"].Error; !strings.Contains(e, "deeper than 10 levels") {
			t.Fatalf("the deepest child's step error: %q", e)
		}
	})
}

// waitChild waits until id's step has started a child whose step step is
// WAITING, and returns the child.
func (n *node) waitChild(id, step string) *workflow.Instance {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if kids := n.children(id); len(kids) > 0 && kids[0].State.Steps[step] != nil && kids[0].State.Steps[step].Status == workflow.StepWaiting {
			return kids[0]
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("no child of %s waits at %s", id, step)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A child moved by a transition of the API carries its outcome to its
// parent's step in that write: the step completes once, and sweeps change
// nothing more.
func TestChildOutcomeOfTransitionCompletesParentOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf}\n")
		inst := n.start("top", "rec-1", "")
		child := n.waitChild(inst.ID, "approve")
		ctx := context.Background()
		if _, err := n.eng.Transition(ctx, child.ID, workflow.StatusRunning, workflow.StatusCompleted); err != nil {
			t.Fatal(err)
		}
		n.waitStatus(inst.ID, workflow.StatusCompleted, time.Second)
		// More sweeps (this node's sweeper runs too) change nothing more.
		for range 3 {
			if err := n.eng.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, time.Second)
		// approve never completed: the leaf's output has no step.
		if got := output(t, done, "sub"); got != `{}` {
			t.Fatalf("sub output %s", got)
		}
		completions := 0
		for _, e := range n.checkHistory(done) {
			if strings.Contains(e.Cause, `step "sub" completed`) {
				completions++
			}
		}
		if completions != 1 {
			t.Fatalf("the step completed %d times", completions)
		}
	})
}

// A child that a batch status change cancels fails its parent's attempt
// (in the batch's transaction), and the retry starts a new child.
func TestChildFailedByBatchRetries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf, retry: {max_attempts: 2, initial_backoff: 10ms}}\n")
		inst := n.start("top", "batch-1", "")
		first := n.waitChild(inst.ID, "approve")
		ctx := context.Background()
		if _, err := n.eng.Action(ctx, first.ID, "pause"); err != nil {
			t.Fatal(err)
		}
		if _, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusPaused, NewStatus: workflow.StatusCancelled,
			UpdatedBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(n.children(inst.ID)) < 2 {
			if time.Now().After(deadline) {
				t.Fatal("no second child")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Attempt 2 runs: a reader is shown it (the state as stored
		// counts it from the version that ends it).
		got, err := n.st.GetWithAttemptsInFlight(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		st := got.State.Steps["sub"]
		if st.Child() == first.ID || st.Status != workflow.StepRunning || st.Attempts != 2 || !strings.Contains(st.Error, "CANCELLED") {
			t.Fatalf("step sub after the first child was cancelled: %+v (child %s)", st, st.Child())
		}
	})
}

// A step timeout bounds one attempt: the child of the attempt that timed
// out is cancelled, and without attempts left the step fails.
func TestChildStepTimeoutCancelsChild(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf, timeout: 300ms, retry: {max_attempts: 1}}\n")
		inst := n.start("top", "to-1", "")
		child := n.waitChild(inst.ID, "approve")
		failed := n.waitStatus(inst.ID, workflow.StatusFailed, 10*time.Second)
		if e := failed.State.Steps["sub"].Error; !strings.Contains(e, "timed out") {
			t.Fatalf("step error %q", e)
		}
		n.checkHistory(n.waitStatus(child.ID, workflow.StatusCancelled, 5*time.Second))
	})
}

// A batch status change that cancels parents cancels their children too.
func TestBatchCancelCancelsChildren(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf}\n")
		inst := n.start("top", "bc-1", "")
		child := n.waitChild(inst.ID, "approve")
		ctx := context.Background()
		if _, err := n.eng.Action(ctx, inst.ID, "pause"); err != nil {
			t.Fatal(err)
		}
		ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusPaused, NewStatus: workflow.StatusCancelled,
			UpdatedBefore: time.Now().Add(time.Hour), Limit: 10})
		if err != nil || len(ids) != 1 || ids[0] != inst.ID {
			t.Fatalf("batch: %v, %v", ids, err)
		}
		n.checkHistory(n.waitStatus(child.ID, workflow.StatusCancelled, 5*time.Second))
	})
}

// A parent that fails for another step's sake leaves no child running.
func TestFailedParentCancelsChild(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		fail := func(context.Context, engine.Task) (json.RawMessage, error) {
			return nil, engine.Permanent(errors.New("no"))
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"fail": fail}})
		n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
		n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf}\n  - {id: gate, type: wait}\n  - {id: boom, type: task, handler: fail, depends_on: [gate]}\n")
		inst := n.start("top", "fp-1", "")
		child := n.waitChild(inst.ID, "approve")
		ctx := context.Background()
		got, err := n.st.Get(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: inst.ID, Step: "gate", ExpectedVersion: &got.Version}); err != nil {
			t.Fatal(err)
		}
		failed := n.waitStatus(inst.ID, workflow.StatusFailed, 10*time.Second)
		if st := failed.State.Steps["sub"]; st.Status != workflow.StepCancelled {
			t.Fatalf("sub is %s", st.Status)
		}
		n.checkHistory(n.waitStatus(child.ID, workflow.StatusCancelled, 5*time.Second))
	})
}
