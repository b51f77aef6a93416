package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
	"github.com/jackc/pgx/v5"
)

// twoWaits is a definition of two wait steps, b after a.
const twoWaits = "name: w2\nsteps:\n  - {id: a, type: wait}\n  - {id: b, type: wait, depends_on: [a]}\n"

// complete completes a step from outside at the instance's current version.
func (n *node) complete(id, step string) *workflow.Instance {
	n.t.Helper()
	cur, err := n.st.Get(context.Background(), id)
	if err != nil {
		n.t.Fatal(err)
	}
	v := cur.Version
	inst, err := n.eng.CompleteStep(context.Background(), engine.CompleteStepParams{ID: id, Step: step, Output: json.RawMessage(`"done"`), ExpectedVersion: &v})
	if err != nil {
		n.t.Fatalf("completing %s/%s: %v", id, step, err)
	}
	return inst
}

// lastCauses returns the causes of the instance's last k history rows.
func (n *node) lastCauses(inst *workflow.Instance, k int) []string {
	n.t.Helper()
	h := n.checkHistory(inst)
	var causes []string
	for _, e := range h[len(h)-k:] {
		causes = append(causes, fmt.Sprintf("%s %s", e.Status, e.Cause))
	}
	return causes
}

// An instance whose last step finished while it was paused completes on
// resume: RUNNING, then COMPLETED, in one transaction.
func TestResumeSettlesWhatFinishedWhilePaused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(twoWaits)
		ctx := context.Background()
		inst := n.start("w2", "s-1", "")
		n.complete(inst.ID, "a")
		if _, err := n.eng.Action(ctx, inst.ID, "pause"); err != nil {
			t.Fatal(err)
		}
		if got := n.complete(inst.ID, "b"); got.Status != workflow.StatusPaused {
			t.Fatalf("the last step completed while paused: instance %s, want PAUSED until resumed", got.Status)
		}
		out, err := n.eng.Action(ctx, inst.ID, "resume")
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if out.Status != workflow.StatusCompleted {
			t.Fatalf("resumed instance is %s, want COMPLETED", out.Status)
		}
		got := n.lastCauses(out, 2)
		if want := []string{"RUNNING resume", "COMPLETED COMPLETED after resume"}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("history ends %q, want %q", got, want)
		}
	})
}

// A step that fails for good while the instance is paused fails it on
// resume; a TIMED_OUT instance whose steps were all completed since then
// completes on retry.
func TestResumeAndRetrySettleFailedAndCompleted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		fail := func(ctx context.Context, _ engine.Task) (json.RawMessage, error) {
			started <- struct{}{}
			<-release
			return nil, errors.New("no")
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 1, handlers: map[string]engine.Handler{"fail": fail}})
		n.define("name: f\nsteps:\n  - {id: a, type: task, handler: fail, retry: {max_attempts: 1}}\n")
		ctx := context.Background()
		inst := n.start("f", "f-1", "")
		<-started
		if _, err := n.eng.Action(ctx, inst.ID, "pause"); err != nil {
			t.Fatal(err)
		}
		close(release)
		deadline := time.Now().Add(10 * time.Second)
		for {
			cur, err := n.st.Get(ctx, inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.State.Steps["a"].Status == workflow.StepFailed {
				if cur.Status != workflow.StatusPaused {
					t.Fatalf("a failed while paused: instance %s, want PAUSED", cur.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a's failure was not recorded while paused")
			}
			time.Sleep(20 * time.Millisecond)
		}
		out, err := n.eng.Action(ctx, inst.ID, "resume")
		if err != nil || out.Status != workflow.StatusFailed {
			t.Fatalf("resume = %v, %v; want FAILED", out, err)
		}
		if got, want := n.lastCauses(out, 2), "RUNNING resume|FAILED FAILED after resume"; strings.Join(got, "|") != want {
			t.Errorf("history ends %q, want %q", got, want)
		}

		n.define("name: t\ntimeout: 100ms\nsteps:\n  - {id: w, type: wait}\n")
		to := n.start("t", "t-1", "")
		n.waitStatus(to.ID, workflow.StatusTimedOut, 10*time.Second)
		n.complete(to.ID, "w")
		out, err = n.eng.Action(ctx, to.ID, "retry")
		if err != nil || out.Status != workflow.StatusCompleted {
			t.Fatalf("retry = %v, %v; want COMPLETED", out, err)
		}
		if got, want := n.lastCauses(out, 2), "RUNNING retry|COMPLETED COMPLETED after retry"; strings.Join(got, "|") != want {
			t.Errorf("history ends %q, want %q", got, want)
		}
	})
}

// Transition (POST /v1/workflows/{id}/status) does what the matching action
// does: PAUSED → RUNNING schedules what became ready while paused.
func TestTransitionActsAsTheAction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(twoWaits)
		ctx := context.Background()
		inst := n.start("w2", "tr-1", "")
		if _, err := n.eng.Transition(ctx, inst.ID, workflow.StatusRunning, workflow.StatusPaused); err != nil {
			t.Fatal(err)
		}
		_, err := n.eng.Transition(ctx, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
		var mismatch *store.StatusMismatchError
		if !errors.As(err, &mismatch) || !errors.Is(err, store.ErrStatusMismatch) || mismatch.Actual != workflow.StatusPaused {
			t.Fatalf("RUNNING → PAUSED on a PAUSED instance: %v; want a status mismatch", err)
		}
		if _, err := n.eng.Transition(ctx, inst.ID, workflow.StatusPaused, workflow.StatusCompleted); !errors.Is(err, workflow.ErrInvalidTransition) {
			t.Fatalf("PAUSED → COMPLETED: %v; want ErrInvalidTransition", err)
		}
		n.complete(inst.ID, "a")
		out, err := n.eng.Transition(ctx, inst.ID, workflow.StatusPaused, workflow.StatusRunning)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != workflow.StatusRunning || out.State.Steps["b"].Status != workflow.StepWaiting {
			t.Fatalf("after PAUSED → RUNNING: %s, b %s; want RUNNING, b WAITING", out.Status, out.State.Steps["b"].Status)
		}
		if got, want := n.lastCauses(out, 1), "RUNNING status PAUSED→RUNNING"; strings.Join(got, "|") != want {
			t.Errorf("history ends %q, want %q", got, want)
		}
		// A transition that is no action changes the status alone.
		out, err = n.eng.Transition(ctx, inst.ID, workflow.StatusRunning, workflow.StatusFailed)
		if err != nil || out.Status != workflow.StatusFailed {
			t.Fatalf("RUNNING → FAILED = %v, %v", out, err)
		}
		// FAILED → RUNNING is a retry: b is waiting again, with a new timeout.
		out, err = n.eng.Transition(ctx, inst.ID, workflow.StatusFailed, workflow.StatusRunning)
		if err != nil || out.Status != workflow.StatusRunning || out.State.Steps["b"].Status != workflow.StepWaiting {
			t.Fatalf("FAILED → RUNNING = %+v, %v", out, err)
		}
		if _, err := n.eng.Transition(ctx, "nope", workflow.StatusPaused, workflow.StatusRunning); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown instance: %v; want ErrNotFound", err)
		}
		n.checkHistory(n.complete(inst.ID, "b"))
	})
}

// A batch to RUNNING resumes (or retries) the definition-based instances it
// moves, in the same version (+1; +2 for one that then settles).
func TestBatchToRunningResumes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(twoWaits)
		n.define("name: w1\nsteps:\n  - {id: b, type: wait}\n")
		ctx := context.Background()
		ready, done, idle := n.start("w2", "b-ready", ""), n.start("w1", "b-done", ""), n.start("w2", "b-idle", "")
		free, err := n.st.Create(ctx, store.CreateParams{ID: "b-free", Status: workflow.StatusRunning})
		if err != nil {
			t.Fatal(err)
		}
		batch := func(from, to workflow.Status) []string {
			t.Helper()
			ids, err := n.eng.BatchStatus(ctx, store.BatchStatusParams{Status: from, NewStatus: to, UpdatedBefore: time.Now().Add(time.Hour), Limit: 100})
			if err != nil {
				t.Fatalf("batch %s → %s: %v", from, to, err)
			}
			return ids
		}
		if ids := batch(workflow.StatusRunning, workflow.StatusPaused); len(ids) != 4 {
			t.Fatalf("paused %v, want 4 instances", ids)
		}
		n.complete(ready.ID, "a")
		n.complete(done.ID, "b") // its last step
		before := map[string]int64{}
		for _, id := range []string{ready.ID, done.ID, idle.ID, free.ID} {
			cur, err := n.st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			before[id] = cur.Version
		}
		if ids := batch(workflow.StatusPaused, workflow.StatusRunning); len(ids) != 4 {
			t.Fatalf("resumed %v, want 4 instances", ids)
		}
		for _, c := range []struct {
			id     string
			status workflow.Status
			b      workflow.StepStatus
			plus   int64
		}{
			{ready.ID, workflow.StatusRunning, workflow.StepWaiting, 1},
			{done.ID, workflow.StatusCompleted, workflow.StepCompleted, 2},
			{idle.ID, workflow.StatusRunning, workflow.StepPending, 1},
		} {
			cur, err := n.st.Get(ctx, c.id)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Status != c.status || cur.State.Steps["b"].Status != c.b || cur.Version != before[c.id]+c.plus {
				t.Errorf("%s after the batch: %s, b %s, version %d; want %s, b %s, version %d", c.id, cur.Status, cur.State.Steps["b"].Status, cur.Version, c.status, c.b, before[c.id]+c.plus)
			}
			n.checkHistory(cur)
		}
		if cur, err := n.st.Get(ctx, free.ID); err != nil || cur.Status != workflow.StatusRunning || cur.Version != before[free.ID]+1 {
			t.Errorf("free-form instance after the batch: %+v, %v; want RUNNING at +1", cur, err)
		}

		// TIMED_OUT → RUNNING is a retry: a new deadline, settled when done.
		n.define("name: t\ntimeout: 100ms\nsteps:\n  - {id: w, type: wait}\n")
		to := n.start("t", "b-to", "")
		timedOut := n.waitStatus(to.ID, workflow.StatusTimedOut, 10*time.Second)
		began := time.Now()
		if ids := batch(workflow.StatusTimedOut, workflow.StatusRunning); len(ids) != 1 {
			t.Fatalf("retried %v, want [%s]", ids, to.ID)
		}
		// The new 100 ms deadline may have passed again by now: the history
		// tells what the batch wrote.
		h, err := n.st.History(ctx, to.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) < int(timedOut.Version)+2 {
			t.Fatalf("history after the batch retry: %+v", h)
		}
		if retried := h[timedOut.Version+1]; retried.Status != workflow.StatusRunning || retried.Cause != "batch TIMED_OUT→RUNNING: retry" ||
			retried.State.Steps["w"].Status != workflow.StepWaiting {
			t.Errorf("batch retry wrote %+v; want RUNNING with w WAITING again, caused by the retry", retried)
		}
		if cur, err := n.st.Get(ctx, to.ID); err != nil || cur.Deadline == nil || !cur.Deadline.After(began) {
			t.Errorf("after batch TIMED_OUT → RUNNING: %+v, %v; want a deadline after the batch", cur, err)
		}
	})
}

// A start may give the new instance's variables, never its steps.
func TestStartWithState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define("name: w1\nsteps:\n  - {id: b, type: wait}\n")
		ctx := context.Background()
		inst, err := n.eng.StartWorkflow(ctx, engine.StartParams{ID: "sv", Definition: "w1",
			State: &workflow.State{Variables: map[string]json.RawMessage{"k": json.RawMessage(`1`)}}})
		if err != nil || string(inst.State.Variables["k"]) != "1" || inst.State.Steps["b"].Status != workflow.StepWaiting {
			t.Fatalf("start with variables = %+v, %v", inst, err)
		}
		_, err = n.eng.StartWorkflow(ctx, engine.StartParams{ID: "sv2", Definition: "w1",
			State: &workflow.State{Steps: map[string]*workflow.StepState{"b": {Status: workflow.StepCompleted}}}})
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "state.steps") {
			t.Fatalf("start with steps: %v; want ErrInvalidArgument naming state.steps", err)
		}
		if _, err := n.st.Get(ctx, "sv2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused start was stored: %v", err)
		}
	})
}

// A batch meets instances of several revisions a fresh engine has not
// loaded yet: it loads each and goes on.
func TestBatchLoadsEveryDefinition(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		first := newNode(t, b, addr, nodeOpts{workers: -1})
		for i := range 4 {
			name := fmt.Sprintf("d%d", i)
			first.define("name: " + name + "\nsteps:\n  - {id: a, type: wait}\n  - {id: b, type: wait, depends_on: [a]}\n")
			inst := first.start(name, "i-"+name, "")
			if _, err := first.eng.Action(context.Background(), inst.ID, "pause"); err != nil {
				t.Fatal(err)
			}
			first.complete(inst.ID, "a")
		}
		fresh := newNode(t, b, addr, nodeOpts{workers: -1})
		ids, err := fresh.eng.BatchStatus(context.Background(), store.BatchStatusParams{Status: workflow.StatusPaused, NewStatus: workflow.StatusRunning, UpdatedBefore: time.Now().Add(time.Hour), Limit: 10})
		if err != nil || len(ids) != 4 {
			t.Fatalf("batch on a fresh engine = %v, %v; want the 4 instances", ids, err)
		}
		for _, id := range ids {
			cur, err := fresh.st.Get(context.Background(), id)
			if err != nil || cur.State.Steps["b"].Status != workflow.StepWaiting {
				t.Errorf("%s after the batch: %+v, %v; want b WAITING", id, cur, err)
			}
		}
	})
}

// A batch retry whose instance has a task row another transaction holds
// (a claim, a worker's completion) waits for that row rather than skipping
// the instance: it holds no lock while it decides, and its write takes the
// task rows before the instance's, as every write does, so the wait cannot
// deadlock; once the row is free the instance is moved.
func TestBatchRetryWaitsForHeldTasks(t *testing.T) {
	for _, b := range backends {
		if b.name != "postgres" {
			continue // one writer at a time on SQLite: no row held by another transaction
		}
		t.Run(b.name, func(t *testing.T) {
			addr := b.newDB(t)
			n := newNode(t, b, addr, nodeOpts{workers: -1})
			n.define("name: t\ntimeout: 100ms\nsteps:\n  - {id: a, type: task, handler: remote}\n")
			inst := n.start("t", "held-1", "")
			n.waitStatus(inst.ID, workflow.StatusTimedOut, 10*time.Second)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			holder, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, "SELECT 1 FROM workflow_tasks WHERE instance_id = $1 FOR UPDATE", inst.ID); err != nil {
				t.Fatal(err)
			}
			p := store.BatchStatusParams{Status: workflow.StatusTimedOut, NewStatus: workflow.StatusRunning, UpdatedBefore: time.Now().Add(time.Hour), Limit: 10}
			type result struct {
				ids []string
				err error
			}
			done := make(chan result, 1)
			go func() {
				ids, err := n.eng.BatchStatus(ctx, p)
				done <- result{ids, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("the batch ended while the task row was held: %v, %v", r.ids, r.err)
			case <-time.After(300 * time.Millisecond):
			}
			if err := holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				if r.err != nil || len(r.ids) != 1 || r.ids[0] != inst.ID {
					t.Fatalf("batch retry once the row is free = %v, %v; want [%s]", r.ids, r.err, inst.ID)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the batch did not end within 10s of the row's release")
			}
			if cur, err := n.st.Get(ctx, inst.ID); err != nil || cur.Status != workflow.StatusRunning {
				t.Fatalf("after the batch: %+v, %v; want RUNNING", cur, err)
			}
		})
	}
}
