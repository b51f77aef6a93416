package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// The Worker type runs registered handlers; a handler registered later
// replaces the earlier one; a permanent error fails the step at once; and a
// context that ends lets the task in flight finish and be reported.
func TestWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: greet
steps:
  - {id: hello, type: task, handler: greet, input: {name: "{{ .input.name }}"}}
  - {id: nap, type: task, handler: nap, depends_on: [hello]}
`)
	b.define(t, `
name: broken
steps:
  - {id: s, type: task, handler: refuse, retry: {max_attempts: 5}}
`)
	w := worker.New(b.client, worker.Options{Concurrency: 2, Wait: time.Second, Name: "test-worker"})
	w.Handle("greet", func(context.Context, worker.Task) (json.RawMessage, error) { return nil, errors.New("replaced") })
	w.Handle("greet", func(_ context.Context, task worker.Task) (json.RawMessage, error) {
		var in struct{ Name string }
		if err := json.Unmarshal(task.Input, &in); err != nil {
			return nil, worker.Permanent(err)
		}
		return json.Marshal(map[string]string{"greeting": "hello " + in.Name})
	})
	var refusals atomic.Int32
	w.Handle("refuse", func(context.Context, worker.Task) (json.RawMessage, error) {
		refusals.Add(1)
		return nil, worker.Permanent(errors.New("no way"))
	})
	napping := make(chan struct{}, 1)
	w.Handle("nap", func(ctx context.Context, task worker.Task) (json.RawMessage, error) {
		napping <- struct{}{}
		select {
		case <-time.After(500 * time.Millisecond):
			return json.RawMessage(`"rested"`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()

	b.start(t, "broken", "b1", "")
	failed := b.waitStatus(t, "b1", workflow.StatusFailed, 20*time.Second)
	if s := failed.State.Steps["s"]; s.Error != "no way" || s.Attempts != 1 || refusals.Load() != 1 {
		t.Errorf("a permanent error: step %+v after %d runs, want failed at once", s, refusals.Load())
	}

	if err := w.Run(ctx); !errors.Is(err, worker.ErrRunning) {
		t.Errorf("a second Run while running = %v, want ErrRunning", err)
	}

	b.start(t, "greet", "g1", `{"name": "ana"}`)
	<-napping
	cancel() // while nap runs: it finishes and is reported before Run returns
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run = %v, want nil after a graceful stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	inst, err := b.client.GetWorkflow(t.Context(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != workflow.StatusCompleted || string(inst.State.Steps["hello"].Output) != `{"greeting":"hello ana"}` ||
		string(inst.State.Steps["nap"].Output) != `"rested"` || inst.State.Steps["nap"].Attempts != 1 {
		t.Fatalf("after a graceful stop: %s, steps %+v", inst.Status, inst.State.Steps)
	}
}

func TestWorkerRefusesBadHandlers(t *testing.T) {
	t.Parallel()
	c := client.New("http://127.0.0.1:1")
	if err := worker.New(c, worker.Options{}).Run(t.Context()); err == nil || err.Error() != "worker: config: Handlers or Workflows must name at least one handler" {
		t.Errorf("no handler: %v", err)
	}
	w := worker.New(c, worker.Options{Concurrency: -1})
	w.Handle("", worker.Echo)
	w.Handle("nil", nil)
	want := "worker: \"\" is not a handler name a worker can serve\nhandler \"nil\" is nil\nconfig: Concurrency must not be negative, got -1"
	if err := w.Run(t.Context()); err == nil || err.Error() != want {
		t.Errorf("bad handlers: %q, want %q", err, want)
	}
}

// A remote worker of a flowd server: here the server runs in this process
// (server.New), as `flowd serve` would elsewhere.
func ExampleWorker() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "flowd-example")
	defer os.RemoveAll(dir)
	zero := 0 // the server runs no step itself: the worker does
	srv, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(dir, "flowd.db"), Addr: "127.0.0.1:0", Workers: &zero})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}

	// The worker: a client of the server, and a handler per handler name.
	w := worker.New(client.New(srv.URL()), worker.Options{Concurrency: 4, Wait: time.Second})
	w.Handle("greet", func(ctx context.Context, t worker.Task) (json.RawMessage, error) {
		var in struct{ Name string }
		if err := json.Unmarshal(t.Input, &in); err != nil {
			return nil, worker.Permanent(err)
		}
		return json.Marshal("hello " + in.Name)
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	c := srv.Client()
	def := `{"name": "greeting", "steps": [{"id": "hello", "type": "task", "handler": "greet", "input": {"name": "{{ .input.name }}"}}]}`
	if _, _, err := c.PutDefinition(ctx, "greeting", []byte(def)); err != nil {
		log.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "greeting", Input: json.RawMessage(`{"name": "ana"}`)})
	if err != nil {
		log.Fatal(err)
	}
	for inst.Status != workflow.StatusCompleted {
		time.Sleep(20 * time.Millisecond)
		if inst, err = c.GetWorkflow(ctx, inst.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(inst.Status, string(inst.State.Steps["hello"].Output))

	stop() // graceful: tasks in flight finish first
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: COMPLETED "hello ana"
}
