package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// held marks the context of the operation whose decision a test holds.
type held struct{}

// holder holds one decision of a node's engine where it gets its rules —
// before any program of the definition runs — until the test lets it go.
// Only decisions made for a context marked with held count: the node's
// own loops, and the writes the test makes meanwhile, are never held.
type holder struct {
	n   *node
	cur atomic.Pointer[hold]
	// bystander is a free-form instance the test writes while a decision
	// is held; writes counts them.
	bystander string
	writes    int
}

// hold is one held decision: the at-th marked decision waits for release;
// entered is closed when it does.
type hold struct {
	at      int32
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *hold) let() { h.once.Do(func() { close(h.release) }) }

func newHolder(t *testing.T, n *node) *holder {
	t.Helper()
	h := &holder{n: n, bystander: "bystander"}
	engine.SetDecideHook(n.eng, func(ctx context.Context) {
		cur := h.cur.Load()
		if ctx.Value(held{}) == nil || cur == nil {
			return
		}
		if cur.calls.Add(1) == cur.at {
			close(cur.entered)
			<-cur.release
		}
	})
	n.define("name: bystanding\nsteps:\n  - {id: a, type: wait}\n")
	if _, err := n.st.Create(context.Background(), store.CreateParams{ID: h.bystander}); err != nil {
		t.Fatal(err)
	}
	return h
}

// during runs op, holds its at-th decision, checks that unrelated writes
// complete meanwhile, then lets the decision go and fails the test when op
// fails.
func (h *holder) during(t *testing.T, at int32, op func(ctx context.Context) error) {
	t.Helper()
	h.around(t, at, op, func() { h.writeBeside(t) })
}

// around runs op, holds its at-th decision while meanwhile runs, then lets
// the decision go and fails the test when op fails.
func (h *holder) around(t *testing.T, at int32, op func(ctx context.Context) error, meanwhile func()) {
	t.Helper()
	cur := &hold{at: at, entered: make(chan struct{}), release: make(chan struct{})}
	h.cur.Store(cur)
	defer h.cur.Store(nil)
	defer cur.let()
	done := make(chan error, 1)
	go func() { done <- op(context.WithValue(context.Background(), held{}, true)) }()
	select {
	case <-cur.entered:
	case err := <-done:
		t.Fatalf("the operation ended without its decision %d being held: %v", at, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the operation did not reach its decision within 10s")
	}
	meanwhile()
	cur.let()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the operation, let go: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the operation did not end within 20s of being let go")
	}
}

// writeBeside makes writes that have nothing to do with the held decision —
// a create, a state write of another instance, a start of another workflow
// — and fails the test when one of them waits for it. A decision made
// inside a write transaction on SQLite would hold its single write lock:
// they would wait until the decision is let go (here: never, so each gives
// up after a bound far beyond what a write takes).
func (h *holder) writeBeside(t *testing.T) {
	t.Helper()
	began := time.Now()
	write := func(what string, w func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := w(ctx); err != nil {
			t.Errorf("%s while a decision is held: %v", what, err)
		}
	}
	write("a create of another workflow", func(ctx context.Context) error {
		_, err := h.n.st.Create(ctx, store.CreateParams{})
		return err
	})
	write("a state write of another workflow", func(ctx context.Context) error {
		cur, err := h.n.st.Get(ctx, h.bystander)
		if err != nil {
			return err
		}
		h.writes++
		state := workflow.State{Variables: map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(h.writes))}}
		_, err = storetest.Replace(ctx, h.n.st, h.bystander, cur.Version, state, "patch")
		return err
	})
	write("a start of another workflow", func(ctx context.Context) error {
		_, err := h.n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "bystanding"})
		return err
	})
	t.Logf("three writes beside the held decision took %s", time.Since(began))
}

// Every decision is read and made outside any write transaction, and
// written with one guarded write after it: while a decision is held where
// it gets its rules (where it would evaluate its programs, for up to a
// second each), writes of other workflows complete. The cases are every
// path that decides: a completion from outside, an action, a task's
// completion, an event's delivery, the sweeper's lease expiry, a batch to
// RUNNING, a start that makes room, a promotion, a child's outcome for its
// parent.
func TestDecisionsHoldNoWriteLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1, noStart: true})
		h := newHolder(t, n)
		n.define(twoWaits)
		n.define("name: tk\nsteps:\n  - {id: a, type: task, handler: remote, retry: {max_attempts: 3, initial_backoff: 1ms}}\n  - {id: b, type: wait, depends_on: [a]}\n")
		n.define("name: paid\nsteps:\n  - {id: paid, type: wait, event: payment, key: \"{{ .input.order }}\"}\n")
		n.define("name: room\nconcurrency: {limit: 1, strategy: cancel_in_progress}\nsteps:\n  - {id: hold, type: wait}\n")
		n.define("name: line\nconcurrency: {limit: 1, strategy: queue}\nsteps:\n  - {id: hold, type: wait}\n")
		ctx := context.Background()
		step := func(id, step string) workflow.StepStatus {
			t.Helper()
			inst, err := n.st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return inst.State.Steps[step].Status
		}

		t.Run("CompleteStep", func(t *testing.T) {
			n.start("w2", "complete", "")
			h.during(t, 1, func(ctx context.Context) error {
				_, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: "complete", Step: "a"})
				return err
			})
			if s := step("complete", "b"); s != workflow.StepWaiting {
				t.Errorf("b is %s after a completed, want WAITING", s)
			}
		})
		t.Run("Resume", func(t *testing.T) {
			n.start("w2", "resume", "")
			if _, err := n.eng.Action(ctx, "resume", "pause"); err != nil {
				t.Fatal(err)
			}
			n.complete("resume", "a")
			h.during(t, 1, func(ctx context.Context) error {
				_, err := n.eng.Action(ctx, "resume", "resume")
				return err
			})
			if s := step("resume", "b"); s != workflow.StepWaiting {
				t.Errorf("b is %s after the resume, want WAITING", s)
			}
		})
		t.Run("CompleteTask", func(t *testing.T) {
			n.start("tk", "task", "")
			task := n.poll()
			h.during(t, 1, func(ctx context.Context) error {
				return n.eng.CompleteTask(ctx, task.ID, task.Lease, json.RawMessage(`"done"`))
			})
			if s := step("task", "b"); s != workflow.StepWaiting {
				t.Errorf("b is %s after a's task completed, want WAITING", s)
			}
		})
		t.Run("PublishEvent", func(t *testing.T) {
			n.start("paid", "event", `{"order": "o-1"}`)
			h.during(t, 1, func(ctx context.Context) error {
				_, err := n.eng.PublishEvent(ctx, "payment", "o-1", json.RawMessage(`{}`))
				return err
			})
			if s := n.status("event"); s != workflow.StatusCompleted {
				t.Errorf("the event's workflow is %s, want COMPLETED", s)
			}
		})
		t.Run("SweepExpiredLease", func(t *testing.T) {
			n.start("tk", "expiry", "")
			task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Lease: time.Millisecond})
			if err != nil || task == nil {
				t.Fatalf("poll: %+v, %v", task, err)
			}
			time.Sleep(20 * time.Millisecond)
			h.during(t, 1, n.eng.Sweep)
			if row, err := n.st.Task(ctx, task.ID); err != nil || row.Status != store.TaskQueued || row.Attempt != 1 {
				t.Errorf("the expired task after the sweep: %+v, %v; want QUEUED after attempt 1", row, err)
			}
		})
		t.Run("BatchToRunning", func(t *testing.T) {
			n.start("w2", "batch", "")
			if _, err := n.eng.Action(ctx, "batch", "pause"); err != nil {
				t.Fatal(err)
			}
			n.complete("batch", "a")
			h.during(t, 1, func(ctx context.Context) error {
				ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: workflow.StatusPaused, NewStatus: workflow.StatusRunning,
					UpdatedBefore: time.Now().Add(time.Hour), Limit: 10})
				if err == nil && len(ids) != 1 {
					err = fmt.Errorf("the batch moved %v, want [batch]", ids)
				}
				return err
			})
			if s := step("batch", "b"); s != workflow.StepWaiting {
				t.Errorf("b is %s after the batch resumed its workflow, want WAITING", s)
			}
		})
		t.Run("MakeRoom", func(t *testing.T) {
			n.start("room", "room-1", "")
			// Decision 1 starts room-2, over the limit; decision 2
			// cancels room-1 to make room for it.
			h.during(t, 2, func(ctx context.Context) error {
				_, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "room-2", Definition: "room"})
				return err
			})
			if a, b := n.status("room-1"), n.status("room-2"); a != workflow.StatusCancelled || b != workflow.StatusRunning {
				t.Errorf("room-1 %s and room-2 %s, want CANCELLED and RUNNING", a, b)
			}
		})
		t.Run("Promote", func(t *testing.T) {
			n.start("line", "line-1", "")
			n.start("line", "line-2", "")
			// Decision 1 cancels line-1; decision 2 starts line-2, which
			// waited for its slot.
			h.during(t, 2, func(ctx context.Context) error {
				_, err := n.eng.Action(ctx, "line-1", "cancel")
				return err
			})
			if s := n.status("line-2"); s != workflow.StatusRunning {
				t.Errorf("line-2 is %s once line-1 was cancelled, want RUNNING", s)
			}
		})
		t.Run("ChildOutcome", func(t *testing.T) {
			// Children are started by a node's own workers.
			n := newNode(t, b, b.newDB(t), nodeOpts{})
			h := newHolder(t, n)
			n.define("name: leaf\nsteps:\n  - {id: approve, type: wait}\n")
			n.define("name: top\nsteps:\n  - {id: sub, type: workflow, definition: leaf}\n  - {id: after, type: wait, depends_on: [sub]}\n")
			n.start("top", "parent", "")
			child := n.waitChild("parent", "approve")
			// Decision 1 completes the child's step; decision 2 is the
			// parent's, on the child's outcome, written with it.
			h.during(t, 2, func(ctx context.Context) error {
				_, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: child.ID, Step: "approve"})
				return err
			})
			if inst, err := n.st.Get(ctx, "parent"); err != nil || inst.State.Steps["after"].Status != workflow.StepWaiting {
				t.Errorf("the parent after its child completed: %+v, %v; want its step after WAITING", inst, err)
			}
		})
	})
}
