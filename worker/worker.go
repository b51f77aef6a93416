package worker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker/task"
)

// Task is one attempt of a task step, as a handler receives it (task.Task).
type Task = task.Task

// Handler runs one attempt of a task step and returns its output, a JSON
// value (task.Handler). An error fails the attempt, which is retried per the
// step's retry policy; wrap it with Permanent to fail the step at once. The
// context ends when the lease is lost (the task was taken away) or the
// worker gives up on the task at shutdown.
type Handler = task.Handler

// Permanent marks err as not worth retrying: the step fails at once.
func Permanent(err error) error { return task.Permanent(err) }

// Options configure a Worker. Zero values take the defaults in brackets.
type Options struct {
	// Name identifies this worker in lease owners and logs [hostname-pid].
	Name string
	// Concurrency is how many tasks run at once, each slot long-polling on its own [4].
	Concurrency int
	// Lease is asked for each task and each heartbeat; heartbeats renew it at
	// a third of what is left [0: the server's default].
	Lease time.Duration
	// Wait is how long one long poll waits for a task [20s, at most 60s].
	Wait time.Duration
	// ShutdownGrace is how long tasks in flight may still finish, and be
	// reported, once Run's context ends; then they are abandoned and their
	// leases expire on the server [10s; negative: abandon at once].
	ShutdownGrace time.Duration
	// Logger receives the worker's structured log [discarded].
	Logger *slog.Logger
}

// Worker runs Go handlers for the task steps of a flowd server, over its
// tasks API (long polls, heartbeats, completions). Create it with New,
// register handlers with Handle, then Run it.
type Worker struct {
	client *client.Client
	opts   Options

	mu        sync.Mutex
	handlers  map[string]Handler
	workflows map[string]Workflow
	running   bool
}

// New returns a worker that takes tasks from the server c talks to
// (client.New(url, client.WithToken(token))).
func New(c *client.Client, opts Options) *Worker {
	return &Worker{client: c, opts: opts, handlers: map[string]Handler{}, workflows: map[string]Workflow{}}
}

// Workflow serves the code workflow name with wf: when Run starts, it puts
// the code definition name (a new revision only when it changed), then
// runs the workflow's runs. A later Workflow of the same name replaces wf.
func (w *Worker) Workflow(name string, wf Workflow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.workflows[name] = wf
}

// Handle serves the task steps whose handler is name with h: a definition's
// step `{type: task, handler: name}`. A later Handle of the same name
// replaces h. Handlers registered while Run runs are served from the next Run.
func (w *Worker) Handle(name string, h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[name] = h
}

// ErrRunning is returned by Run when the worker is running already.
var ErrRunning = errors.New("worker: already running")

// Run serves the registered handlers until ctx ends, then stops gracefully:
// it polls no more, lets the tasks in flight finish and report their outcome
// within Options.ShutdownGrace, and returns nil. A server that shuts down
// ends the long polls at once; the worker keeps polling (with backoff while
// the server is unreachable) until ctx ends.
//
// Run returns an error at once for invalid options or handler names (none
// registered, an empty name, a nil handler), and after stopping when the
// server refuses the worker (400, 401, 403, 404): those do not get better by
// retrying. See the package function Run for the details of leases,
// heartbeats and failures.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return ErrRunning
	}
	w.running = true
	handlers, workflows := maps.Clone(w.handlers), maps.Clone(w.workflows)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	return Run(ctx, Config{
		Client: w.client, Name: w.opts.Name, Handlers: handlers, Workflows: workflows, Concurrency: w.opts.Concurrency,
		Lease: w.opts.Lease, Wait: w.opts.Wait, ShutdownGrace: w.opts.ShutdownGrace, Logger: w.opts.Logger,
	})
}
