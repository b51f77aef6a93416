package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// concDef is a definition whose instances wait for a completion from
// outside, with a concurrency limit of 2 per input key under strategy.
func concDef(name, strategy string, limit int) string {
	return fmt.Sprintf(`
name: %s
concurrency: {key: "k-{{ .input.k }}", limit: %d, strategy: %s}
steps:
  - {id: hold, type: wait}
`, name, limit, strategy)
}

// sleepDef holds its slot with a long timer: a task row that a cancel
// must release.
func sleepDef(name, strategy string, limit int) string {
	return fmt.Sprintf(`
name: %s
concurrency: {limit: %d, strategy: %s}
steps:
  - {id: nap, type: sleep, duration: 1h}
`, name, limit, strategy)
}

// finish completes the instance's wait step once it waits.
func (n *node) finish(id string) {
	n.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		inst, err := n.st.Get(ctx, id)
		if err != nil {
			n.t.Fatal(err)
		}
		if inst.State.Steps["hold"].Status == workflow.StepWaiting {
			break
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: hold is %s, never WAITING", id, inst.State.Steps["hold"].Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: id, Step: "hold"}); err != nil {
		n.t.Fatalf("complete %s: %v", id, err)
	}
}

func (n *node) status(id string) workflow.Status {
	n.t.Helper()
	inst, err := n.st.Get(context.Background(), id)
	if err != nil {
		n.t.Fatal(err)
	}
	return inst.Status
}

func TestConcurrencyQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(concDef("q", "queue", 2))
		ctx := context.Background()
		for i := 1; i <= 4; i++ {
			inst := n.start("q", fmt.Sprintf("a%d", i), `{"k": "a"}`)
			want := workflow.StatusRunning
			if i > 2 {
				want = workflow.StatusQueued
			}
			if inst.Status != want {
				t.Fatalf("a%d started %s, want %s", i, inst.Status, want)
			}
		}
		if inst := n.start("q", "b1", `{"k": "b"}`); inst.Status != workflow.StatusRunning {
			t.Fatalf("b1 (another key) started %s", inst.Status)
		}
		// A QUEUED instance has no task and its steps are all PENDING.
		queued, _ := n.st.Get(ctx, "a3")
		if tasks, err := n.st.TasksOfInstance(ctx, "a3"); err != nil || len(tasks) != 0 {
			t.Errorf("a QUEUED instance has tasks: %v, %v", tasks, err)
		}
		if queued.State.Steps["hold"].Status != workflow.StepPending || queued.Deadline != nil {
			t.Errorf("queued: hold %s, deadline %v", queued.State.Steps["hold"].Status, queued.Deadline)
		}
		// A slot frees: the oldest QUEUED instance starts, the next waits.
		n.finish("a1")
		n.waitStatus("a1", workflow.StatusCompleted, 10*time.Second)
		n.waitStatus("a3", workflow.StatusRunning, 10*time.Second)
		if st := n.status("a4"); st != workflow.StatusQueued {
			t.Errorf("a4 is %s with the key full again", st)
		}
		// A QUEUED instance can be cancelled; it never ran.
		if out, err := n.eng.Action(ctx, "a4", "cancel"); err != nil || out.Status != workflow.StatusCancelled {
			t.Fatalf("cancel of a QUEUED instance: %v, %v", out, err)
		}
		n.finish("a3")
		done := n.waitStatus("a3", workflow.StatusCompleted, 10*time.Second)
		h := n.checkHistory(done)
		if h[0].Status != workflow.StatusQueued || h[0].Cause != rules.QueuedCause || h[1].Status != workflow.StatusRunning || h[1].Cause != rules.PromoteCause {
			t.Errorf("history of a queued instance: %+v", h[:2])
		}
	})
}

func TestConcurrencyPauseAndRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(concDef("r", "queue", 1))
		ctx := context.Background()
		n.start("r", "x1", `{"k": 1}`)
		// A status forced past the actions frees the slot as well.
		if _, err := n.eng.Transition(ctx, "x1", workflow.StatusRunning, workflow.StatusFailed); err != nil {
			t.Fatal(err)
		}
		if inst := n.start("r", "x2", `{"k": 1}`); inst.Status != workflow.StatusRunning {
			t.Fatalf("x2 started %s with the slot free", inst.Status)
		}
		_, err := n.eng.Action(ctx, "x1", "retry")
		if !errors.Is(err, store.ErrConcurrencyLimit) {
			t.Fatalf("retry over the limit: %v, want ErrConcurrencyLimit", err)
		}
		if st := n.status("x1"); st != workflow.StatusFailed {
			t.Errorf("x1 is %s after the refused retry", st)
		}
		// PAUSED keeps its slot: a start queues, the resume is allowed.
		if _, err := n.eng.Action(ctx, "x2", "pause"); err != nil {
			t.Fatal(err)
		}
		if inst := n.start("r", "x3", `{"k": 1}`); inst.Status != workflow.StatusQueued {
			t.Fatalf("x3 started %s while the slot's holder is PAUSED", inst.Status)
		}
		if _, err := n.eng.Transition(ctx, "x3", workflow.StatusQueued, workflow.StatusRunning); !errors.Is(err, store.ErrConcurrencyLimit) {
			t.Errorf("forcing a QUEUED instance over the limit: %v", err)
		}
		if _, err := n.eng.Action(ctx, "x2", "resume"); err != nil {
			t.Fatalf("resume of the slot's holder: %v", err)
		}
		if _, err := n.eng.Action(ctx, "x2", "cancel"); err != nil {
			t.Fatal(err)
		}
		n.waitStatus("x3", workflow.StatusRunning, 10*time.Second)
		// A key that does not render is the caller's mistake.
		_, err = n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "r", Input: []byte(`{}`)})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("start without the key's input: %v, want ErrInvalidArgument", err)
		}
	})
}

func TestConcurrencyCancelNewest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(concDef("cn", "cancel_newest", 1))
		n.start("cn", "n1", `{"k": 1}`)
		out := n.start("cn", "n2", `{"k": 1}`)
		if out.Status != workflow.StatusCancelled {
			t.Fatalf("start over the limit: %s, want CANCELLED", out.Status)
		}
		h := n.checkHistory(out)
		if last := h[len(h)-1]; last.Cause != workflow.ConcurrencyLimitCause {
			t.Errorf("cause = %q, want %q", last.Cause, workflow.ConcurrencyLimitCause)
		}
		if st := n.status("n1"); st != workflow.StatusRunning {
			t.Errorf("n1 is %s", st)
		}
	})
}

func TestConcurrencyCancelInProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(sleepDef("cp", "cancel_in_progress", 2))
		ctx := context.Background()
		n.start("cp", "o1", `{}`)
		time.Sleep(time.Millisecond)
		n.start("cp", "o2", `{}`)
		out := n.start("cp", "o3", `{}`)
		if out.Status != workflow.StatusRunning {
			t.Fatalf("o3 started %s, want RUNNING", out.Status)
		}
		old := n.waitStatus("o1", workflow.StatusCancelled, 10*time.Second)
		h := n.checkHistory(old)
		if last := h[len(h)-1]; last.Cause != rules.MadeRoomCause {
			t.Errorf("o1's cause = %q", last.Cause)
		}
		tasks, err := n.st.TasksOfInstance(ctx, "o1")
		if err != nil || len(tasks) != 1 || tasks[0].Status != store.TaskCancelled {
			t.Errorf("o1's tasks after its cancel: %+v, %v", tasks, err)
		}
		if st := n.status("o2"); st != workflow.StatusRunning {
			t.Errorf("o2 (not the oldest) is %s", st)
		}
	})
}

func TestConcurrencySweeperPromotes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(concDef("sw", "queue", 1))
		ctx := context.Background()
		def, err := store.GetDefinition(ctx, n.st, "sw", 0)
		if err != nil {
			t.Fatal(err)
		}
		// A QUEUED instance with a free slot and nobody to promote it (its
		// node died after the write that freed the slot): the sweeper
		// starts it.
		st := workflow.State{Steps: map[string]*workflow.StepState{"hold": {Status: workflow.StepPending}}}
		if _, err := n.st.Create(ctx, store.CreateParams{ID: "orphan", Definition: "sw", DefinitionRevision: def.Revision,
			Status: workflow.StatusQueued, Input: []byte(`{"k": 1}`), State: st,
			Concurrency: &store.ConcurrencySlot{Key: "k-1", Limit: 1}}); err != nil {
			t.Fatal(err)
		}
		inst := n.waitStatus("orphan", workflow.StatusRunning, 10*time.Second)
		if s := inst.State.Steps["hold"].Status; s != workflow.StepRunning && s != workflow.StepWaiting {
			t.Errorf("promoted by the sweeper: hold is %s", s)
		}
		n.finish("orphan")
		n.waitStatus("orphan", workflow.StatusCompleted, 10*time.Second)
	})
}

// A batch QUEUED → RUNNING starts the instances as a promotion does: first
// steps scheduled, workflow timeout from now.
func TestConcurrencyBatchStartsQueued(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{noStart: true})
		n.define("name: bq\ntimeout: 1h\nconcurrency: {limit: 5}\nsteps:\n  - {id: nap, type: sleep, duration: 1h}\n")
		ctx := context.Background()
		def, err := store.GetDefinition(ctx, n.st, "bq", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"b1", "b2"} {
			st := workflow.State{Steps: map[string]*workflow.StepState{"nap": {Status: workflow.StepPending}}}
			if _, err := n.st.Create(ctx, store.CreateParams{ID: id, Definition: "bq", DefinitionRevision: def.Revision,
				Status: workflow.StatusQueued, State: st, Concurrency: &store.ConcurrencySlot{Limit: 5}}); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusQueued, NewStatus: workflow.StatusRunning,
			UpdatedBefore: time.Now().Add(time.Hour), Limit: 10, Cause: "batch"})
		if err != nil || len(ids) != 2 {
			t.Fatalf("batch: %v, %v", ids, err)
		}
		for _, id := range ids {
			inst, _ := n.st.Get(ctx, id)
			tasks, _ := n.st.TasksOfInstance(ctx, id)
			if inst.Status != workflow.StatusRunning || inst.Deadline == nil || len(tasks) != 1 || inst.State.Steps["nap"].Status != workflow.StepRunning {
				t.Errorf("%s after the batch: %s, deadline %v, %d tasks, nap %s", id, inst.Status, inst.Deadline, len(tasks), inst.State.Steps["nap"].Status)
			}
		}
	})
}

// A workflow step's child of a definition with a limit queues behind the
// running one and starts when it finishes; the parents complete in turn.
func TestConcurrencyChildWorkflows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		n.define(concDef("kid", "queue", 1))
		n.define("name: parent\nsteps:\n  - {id: sub, type: workflow, definition: kid, input: {k: same}}\n")
		ctx := context.Background()
		n.start("parent", "p1", `{}`)
		n.start("parent", "p2", `{}`)
		childOf := func(id string) string {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				inst, err := n.st.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if c := inst.State.Steps["sub"].ChildOf(0); c != "" {
					return c
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s never started its child", id)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		c1, c2 := childOf("p1"), childOf("p2")
		running, queued := c1, c2
		if n.status(c1) == workflow.StatusQueued {
			running, queued = c2, c1
		}
		if n.status(running) != workflow.StatusRunning || n.status(queued) != workflow.StatusQueued {
			t.Fatalf("children: %s %s, %s %s; want one RUNNING, one QUEUED", c1, n.status(c1), c2, n.status(c2))
		}
		n.finish(running)
		n.waitStatus(queued, workflow.StatusRunning, 10*time.Second)
		n.finish(queued)
		n.waitStatus("p1", workflow.StatusCompleted, 10*time.Second)
		n.waitStatus("p2", workflow.StatusCompleted, 10*time.Second)
	})
}

// A batch QUEUED → RUNNING that would hold more slots of a key than its
// limit starts none of them: the guarded group write refuses it whole.
func TestConcurrencyBatchOverLimitStartsNone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{noStart: true})
		n.define("name: bl\ntimeout: 1h\nconcurrency: {limit: 2}\nsteps:\n  - {id: nap, type: sleep, duration: 1h}\n")
		ctx := context.Background()
		def, err := store.GetDefinition(ctx, n.st, "bl", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"l1", "l2", "l3"} {
			st := workflow.State{Steps: map[string]*workflow.StepState{"nap": {Status: workflow.StepPending}}}
			if _, err := n.st.Create(ctx, store.CreateParams{ID: id, Definition: "bl", DefinitionRevision: def.Revision,
				Status: workflow.StatusQueued, State: st, Concurrency: &store.ConcurrencySlot{Limit: 2}}); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusQueued, NewStatus: workflow.StatusRunning,
			UpdatedBefore: time.Now().Add(time.Hour), Limit: 10, Cause: "batch"})
		if !errors.Is(err, store.ErrConcurrencyLimit) || len(ids) != 0 {
			t.Fatalf("batch of three into two slots = %v, %v; want ErrConcurrencyLimit", ids, err)
		}
		for _, id := range []string{"l1", "l2", "l3"} {
			if inst, _ := n.st.Get(ctx, id); inst.Status != workflow.StatusQueued {
				t.Errorf("%s is %s after the refused batch", id, inst.Status)
			}
		}
	})
}
