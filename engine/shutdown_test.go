package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// slowHandler runs for d unless its context ends first; it counts its runs
// and reports each start on started.
func slowHandler(d time.Duration, runs *atomic.Int32, started chan<- struct{}) engine.Handler {
	return func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-time.After(d):
			return json.RawMessage(`"slept"`), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

const slowThenEcho = `
name: slow-then-echo
steps:
  - {id: a, type: task, handler: slow}
  - {id: b, type: task, handler: echo, depends_on: [a]}
`

// A shutdown that begins while a step runs lets it finish and records it,
// and starts nothing more: the next step stays for another node.
func TestShutdownFinishesStepsInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var runs atomic.Int32
		started := make(chan struct{}, 4)
		addr := b.newDB(t)
		n := newNode(t, b, addr, nodeOpts{lease: time.Minute, handlers: map[string]engine.Handler{
			"slow": slowHandler(2*time.Second, &runs, started), "echo": echo,
		}})
		n.define(slowThenEcho)
		inst := n.start("slow-then-echo", "", `{}`)
		<-started

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.eng.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown = %v, want nil: the step finished in time", err)
		}
		got, err := n.st.Get(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a := got.State.Steps["a"]; a == nil || a.Status != workflow.StepCompleted || a.Attempts != 1 || string(a.Output) != `"slept"` {
			t.Fatalf("step a after shutdown = %+v, want COMPLETED after 1 attempt", a)
		}
		if bs := got.State.Steps["b"]; bs != nil && bs.Status == workflow.StepCompleted {
			t.Fatalf("step b ran on a node that was shutting down: %+v", bs)
		}
		if got.Status != workflow.StatusRunning {
			t.Fatalf("instance is %s, want RUNNING", got.Status)
		}

		// Step b was not leased to the stopped node: another one runs it now,
		// long before a lease of a minute could have expired.
		other := newNode(t, b, addr, nodeOpts{lease: time.Minute, handlers: map[string]engine.Handler{
			"slow": slowHandler(0, &runs, started), "echo": echo,
		}})
		other.waitStatus(inst.ID, workflow.StatusCompleted, 20*time.Second)
		if r := runs.Load(); r != 1 {
			t.Fatalf("the slow step ran %d times, want 1", r)
		}
	})
}

// Past the shutdown's deadline the handler is cancelled and its task released:
// claimable again at once, without waiting for its lease to expire.
func TestShutdownDeadlineReleasesLeases(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var runs atomic.Int32
		started := make(chan struct{}, 4)
		addr := b.newDB(t)
		n := newNode(t, b, addr, nodeOpts{lease: time.Hour, handlers: map[string]engine.Handler{
			"slow": slowHandler(time.Hour, &runs, started),
		}})
		n.define(`{"name": "slow", "steps": [{"id": "a", "type": "task", "handler": "slow"}]}`)
		inst := n.start("slow", "", `{}`)
		<-started

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := n.eng.Shutdown(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown past its deadline = %v, want context.DeadlineExceeded", err)
		}
		if want := "engine: handlers still running at the shutdown deadline were cancelled and their tasks released: context deadline exceeded"; err.Error() != want {
			t.Errorf("Shutdown error = %q, want %q", err, want)
		}

		other := newNode(t, b, addr, nodeOpts{workers: -1})
		task, err := other.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"slow"}})
		if err != nil || task == nil {
			t.Fatalf("the released task is not claimable at once: %+v, %v", task, err)
		}
		if task.WorkflowID != inst.ID || task.Step != "a" {
			t.Fatalf("polled %+v, want step a of %s", task, inst.ID)
		}
		if err := other.eng.CompleteTask(context.Background(), task.ID, task.Lease, json.RawMessage(`"remote"`)); err != nil {
			t.Fatal(err)
		}
		done := other.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		if a := done.State.Steps["a"]; string(a.Output) != `"remote"` {
			t.Fatalf("step a = %+v", a)
		}
	})
}

// Long polls in flight end with no task as soon as a shutdown begins, and
// later ones answer at once.
func TestShutdownEndsLongPolls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{})
		const polls = 24
		type result struct {
			task *engine.Task
			err  error
		}
		results := make(chan result, polls)
		var wg sync.WaitGroup
		for range polls {
			wg.Go(func() {
				task, err := n.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"nobody"}, Wait: time.Hour})
				results <- result{task, err}
			})
		}
		time.Sleep(100 * time.Millisecond) // let the polls start waiting
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.eng.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(20 * time.Second):
			t.Fatal("long polls (waiting up to an hour) still run after the shutdown")
		}
		close(results)
		for r := range results {
			if r.task != nil || r.err != nil {
				t.Errorf("poll during shutdown = %+v, %v; want no task and no error", r.task, r.err)
			}
		}
		task, err := n.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"nobody"}, Wait: time.Hour})
		if task != nil || err != nil {
			t.Errorf("poll after shutdown = %+v, %v", task, err)
		}
	})
}
