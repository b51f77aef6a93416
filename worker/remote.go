package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker/task"
)

// Defaults of Config.
const (
	DefaultConcurrency   = 4
	DefaultWait          = 20 * time.Second
	DefaultShutdownGrace = 10 * time.Second
	// MaxWait is the longest long poll the server accepts.
	MaxWait = 60 * time.Second
)

// Backoff of failed calls to the server: doubling from backoffMin to
// backoffMax, each wait drawn from its upper half.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// abandonWait is how long Run still waits, after abandoning the tasks in
// flight, for their goroutines to notice.
const abandonWait = time.Second

// Config configures Run. Zero values take the defaults in brackets.
type Config struct {
	Client *client.Client // required
	// Name identifies this worker in lease owners [hostname-pid].
	Name string
	// Handlers are served by name: the worker polls for exactly these and
	// the Workflows.
	Handlers map[string]Handler
	// Workflows are the code workflows served by name: Run puts each one's
	// code definition when it starts (a new revision only when it
	// changed), then serves its runs.
	Workflows map[string]Workflow
	// Concurrency is how many tasks run at once, each slot polling on its own [4].
	Concurrency int
	// Lease is asked for each task and each heartbeat [0: the server's default].
	Lease time.Duration
	// Wait is how long one long poll waits for a task [20s, at most 60s].
	Wait time.Duration
	// ShutdownGrace is how long tasks in flight may still finish, and be
	// reported, once ctx ends; then they are abandoned and their leases expire
	// on the server [10s; negative: abandon at once].
	ShutdownGrace time.Duration
	Logger        *slog.Logger // [discard]
}

func (c *Config) validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("config: Client is required"))
	}
	if len(c.Handlers) == 0 && len(c.Workflows) == 0 {
		errs = append(errs, errors.New("config: Handlers or Workflows must name at least one handler"))
	}
	// By name, so that the same mistakes are reported in the same order.
	for _, name := range slices.Sorted(maps.Keys(c.Handlers)) {
		h := c.Handlers[name]
		switch {
		case name == "" || strings.HasPrefix(name, "flowd:"):
			errs = append(errs, fmt.Errorf("%q is not a handler name a worker can serve", name))
		case h == nil:
			errs = append(errs, fmt.Errorf("handler %q is nil", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Workflows)) {
		switch {
		case name == "" || strings.HasPrefix(name, "flowd:"):
			errs = append(errs, fmt.Errorf("%q is not a workflow name a worker can serve", name))
		case c.Workflows[name].Run == nil:
			errs = append(errs, fmt.Errorf("workflow %q has no Run function", name))
		case c.Handlers[name] != nil:
			errs = append(errs, fmt.Errorf("%q is both a handler and a workflow", name))
		}
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("config: Concurrency must not be negative, got %d", c.Concurrency))
	}
	if c.Lease != 0 && (c.Lease < time.Second || c.Lease > time.Hour) {
		errs = append(errs, fmt.Errorf("config: Lease must be 0 (the server's default) or from 1s to 1h, got %s", c.Lease))
	}
	if c.Wait < 0 || c.Wait > MaxWait {
		errs = append(errs, fmt.Errorf("config: Wait must be from 0 to %s, got %s", MaxWait, c.Wait))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "worker"
		}
		c.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Run serves cfg.Handlers to the server behind cfg.Client over the tasks API
// until ctx ends: cfg.Concurrency slots each long-poll for a
// task, run its handler and report the outcome. A handler's context ends with
// its lease, which heartbeats at a third of the lease extend; a heartbeat
// answered 409 means the task was taken away (instance cancelled, lease
// expired, step completed by hand) and cancels the handler, whose result is
// then dropped. An error marked Permanent fails the step at once; any
// other error, and a panic, fails the attempt, which is retried per the step's
// policy. Transport and server errors are retried with backoff.
//
// A server that cannot be reached at all on the first poll (connection
// refused, unknown host, a connection that could not be made in time) ends
// Run at once: that is a wrong URL or a server not started, not an outage.
// A connection made and closed unanswered (a server restarting) is an
// outage. Once the server has answered (a poll, or the put of the
// workflows' definitions), failed
// polls are retried with backoff; the worker logs once when they start
// failing and once when the server answers again.
//
// Run returns nil once ctx has ended and the tasks in flight have finished
// (within cfg.ShutdownGrace; the rest are abandoned and run again elsewhere
// when their leases expire). It returns an error at once for an invalid cfg
// or a server it cannot reach, and after shutting down when the server
// refuses the worker (400, 401, 403, 404): those do not get better by
// retrying.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	r := &runner{cfg: cfg, log: cfg.Logger, names: served(cfg)}
	if err := r.putDefinitions(ctx); err != nil {
		return err
	}
	// A server that took the workflows' definitions was reached: a first
	// poll that fails is an outage from here on.
	r.answered.Store(len(cfg.Workflows) > 0)
	r.poll = api.PollRequest{Worker: cfg.Name, Handlers: r.names}
	wait := cfg.Wait.Seconds()
	r.poll.WaitSeconds = &wait
	if cfg.Lease > 0 {
		lease := cfg.Lease.Seconds()
		r.poll.LeaseSeconds = &lease
	}

	// Polling stops with ctx (or a fatal error); the tasks in flight run on
	// workCtx, which outlives ctx by the grace period.
	pollCtx, stopPolling := context.WithCancelCause(ctx)
	defer stopPolling(nil)
	r.stopPolling = stopPolling
	workCtx, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)

	lease := any(cfg.Lease)
	if cfg.Lease == 0 {
		lease = "server default"
	}
	r.log.Info("worker started", "name", cfg.Name, "handlers", strings.Join(r.names, ","), "concurrency", cfg.Concurrency,
		"lease", lease, "wait", cfg.Wait)
	var slots sync.WaitGroup
	for range cfg.Concurrency {
		slots.Go(func() { r.serve(pollCtx, workCtx) })
	}
	done := make(chan struct{})
	go func() { slots.Wait(); close(done) }()

	<-pollCtx.Done()
	grace := time.NewTimer(max(cfg.ShutdownGrace, 0))
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		if n := r.inFlight.Load(); n > 0 {
			r.log.Warn("abandoning tasks still running; their leases expire on the server and they run again",
				"tasks", n, "grace", max(cfg.ShutdownGrace, 0))
		}
		abandon(errAbandoned)
		select {
		case <-done:
		case <-time.After(abandonWait):
			// A handler that ignores its context cannot be waited for:
			// return anyway, its result will never be reported.
		}
	}
	if err := r.fatal.Load(); err != nil {
		return *err
	}
	r.log.Info("worker stopped")
	return nil
}

var (
	errAbandoned    = errors.New("the worker is shutting down and abandoned the task")
	errLeaseExpired = errors.New("the lease expired: heartbeats did not reach the server")
	errTimedOut     = errors.New("attempt timed out: the step's timeout caps the lease")
)

type runner struct {
	cfg         Config
	log         *slog.Logger
	names       []string
	poll        api.PollRequest
	stopPolling context.CancelCauseFunc
	fatal       atomic.Pointer[error]
	inFlight    atomic.Int64
	// answered is set by the first poll the server answers: before it, a
	// server that cannot be reached is fatal, after it, an outage.
	answered atomic.Bool

	// An outage starts with a failed poll and ends with a successful one;
	// long polls overlap, so only a poll sent after the other event counts.
	mu        sync.Mutex
	downSince time.Time // when polls started failing; zero: they work
	upSince   time.Time // when the last outage ended
}

// serve is one slot: poll, run, report, until polling stops.
func (r *runner) serve(pollCtx, workCtx context.Context) {
	failures := 0
	for pollCtx.Err() == nil {
		start := time.Now()
		t, err := r.cfg.Client.PollTask(pollCtx, r.poll)
		switch {
		case pollCtx.Err() != nil:
			// A task the server leased just now is lost with the response: its
			// lease expires and it runs again.
			return
		case err != nil && refused(err):
			r.stop(fmt.Errorf("worker: the server refused to hand out tasks: %w", err))
			return
		case err != nil && unreachable(err) && !r.answered.Load():
			r.stop(fmt.Errorf("worker: cannot reach the server: %w", err))
			return
		case err != nil:
			failures++
			d := backoff(failures)
			r.pollFailed(start, err, failures, d)
			sleep(pollCtx, d)
			continue
		}
		failures = 0
		r.answered.Store(true)
		r.pollWorked(start)
		if t == nil {
			// The server waits cfg.Wait before it says "no task"; one that
			// answers much sooner must not make this a busy loop.
			if time.Since(start) < r.cfg.Wait/2 {
				sleep(pollCtx, backoff(3))
			}
			continue
		}
		r.inFlight.Add(1)
		r.execute(workCtx, t)
		r.inFlight.Add(-1)
	}
}

// served is every name cfg serves, sorted: its handlers and workflows.
func served(cfg Config) []string {
	names := slices.Concat(slices.Collect(maps.Keys(cfg.Handlers)), slices.Collect(maps.Keys(cfg.Workflows)))
	slices.Sort(names)
	return names
}

// putDefinitions puts the code definition of each workflow served: a new
// revision only when it changed.
func (r *runner) putDefinitions(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(r.cfg.Workflows)) {
		body, err := definitionOf(name, r.cfg.Workflows[name])
		if err != nil {
			return fmt.Errorf("worker: workflow %q: %w", name, err)
		}
		if _, _, err := r.cfg.Client.PutDefinition(ctx, name, body); err != nil {
			return fmt.Errorf("worker: putting the definition of workflow %q: %w", name, err)
		}
	}
	return nil
}

// stop ends polling for good with err, which Run returns; the first such
// error wins.
func (r *runner) stop(err error) {
	r.fatal.CompareAndSwap(nil, &err)
	r.stopPolling(err)
}

// pollFailed logs the first failed poll of an outage as a warning, and the
// others, of every slot, at debug level only: one line, not one a slot a
// retry. sent is when the poll was sent.
func (r *runner) pollFailed(sent time.Time, err error, failures int, retryIn time.Duration) {
	r.mu.Lock()
	first := r.downSince.IsZero() && sent.After(r.upSince)
	if first {
		r.downSince = time.Now()
	}
	r.mu.Unlock()
	if first {
		r.log.Warn("polling for tasks failed; retrying with backoff until the server answers", "err", err)
		return
	}
	r.log.Debug("polling for tasks", "err", err, "failures", failures, "retry_in", retryIn.Round(time.Millisecond))
}

// pollWorked logs the end of an outage, once: at the first successful poll
// sent after it began.
func (r *runner) pollWorked(sent time.Time) {
	r.mu.Lock()
	since := r.downSince
	ended := !since.IsZero() && sent.After(since)
	if ended {
		r.downSince, r.upSince = time.Time{}, time.Now()
	}
	r.mu.Unlock()
	if ended {
		r.log.Info("the server answers again", "down_for", time.Since(since).Round(time.Millisecond))
	}
}

// unreachable reports an error that got no answer from the server at all.
func unreachable(err error) bool {
	// Not any transport error: a connection that was made and then closed
	// unanswered (EOF, a reset) is a server that was there, restarting.
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial"
}

// refused reports the answers to a poll that retrying does not change: a bad
// request, a missing or unknown token, or no flowd API at the URL.
func refused(err error) bool {
	switch client.StatusCode(err) {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed:
		return true
	}
	return false
}

// backoff is the wait after the nth consecutive failure: doubling from
// backoffMin up to backoffMax, drawn from the upper half so that slots and
// workers that failed together do not retry together.
func backoff(n int) time.Duration {
	d := backoffMax
	if n < 16 {
		d = min(backoffMin<<(n-1), backoffMax)
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// execute runs one task and reports its outcome, unless the task was taken
// away or abandoned meanwhile.
func (r *runner) execute(workCtx context.Context, tr *api.TaskResponse) {
	start := time.Now()
	t := Task{
		ID: tr.TaskID, WorkflowID: tr.WorkflowID, Step: tr.Step, Handler: tr.Handler, Attempt: tr.Attempt, Index: tr.Index,
		Input: tr.Input, IdempotencyKey: tr.IdempotencyKey, Lease: tr.Lease, LeaseUntil: tr.LeaseUntil,
		TraceParent: tr.TraceParent, Kind: tr.Kind, Journal: tr.Journal,
	}
	// The handler, its heartbeats and its report continue the workflow's
	// trace.
	workCtx = continueTrace(workCtx, t.TraceParent)
	log := r.log.With("task", t.ID, "workflow", t.WorkflowID, "step", t.Step, "handler", t.Handler, "attempt", t.Attempt)

	if t.LeaseUntil.IsZero() {
		// A server that does not say when the lease ends: assume the shortest
		// one it could have given.
		t.LeaseUntil = start.Add(max(r.cfg.Lease, time.Second))
	}
	ctx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	var hb sync.WaitGroup
	leaseEnd := &leaseClock{until: t.LeaseUntil}
	hb.Go(func() { r.keepLease(ctx, cancel, t, leaseEnd, log) })
	output, err := r.call(ctx, t)
	stopped := context.Cause(ctx) // before cancel(nil) below hides it
	cancel(nil)
	hb.Wait()
	took := time.Since(start).Round(time.Millisecond)

	switch {
	case errors.Is(err, errSuspended):
		log.Info("run suspended", "duration", took)
		return
	case errors.Is(err, ErrCancelled) && stopped == nil:
		log.Warn("run dropped", "reason", err.Error(), "duration", took)
		return
	}
	if stopped != nil {
		// The lease is gone (or going): a report would be fenced off anyway.
		level := slog.LevelWarn
		if errors.Is(stopped, errAbandoned) {
			level = slog.LevelInfo
		}
		log.Log(workCtx, level, "task dropped", "reason", stopped.Error(), "duration", took)
		return
	}
	msg, args := "task completed", []any{"duration", took}
	report := func(ctx context.Context) error {
		return r.cfg.Client.CompleteTask(ctx, t.ID, t.Lease, output)
	}
	if err != nil {
		retryable := !task.IsPermanent(err)
		msg, args = "task failed", append(args, "retryable", retryable, "err", err.Error())
		report = func(ctx context.Context) error {
			return r.cfg.Client.FailTask(ctx, t.ID, t.Lease, err.Error(), retryable)
		}
	}
	rerr := r.report(workCtx, leaseEnd, report)
	if code := client.StatusCode(rerr); err == nil && (code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge) {
		// The server will never take this output (too large, say): retrying
		// the attempt would only produce it again.
		msg = "task failed"
		reason := fmt.Sprintf("the server refused the handler's output: %v", rerr)
		args = append(args, "retryable", false, "err", reason)
		rerr = r.report(workCtx, leaseEnd, func(ctx context.Context) error {
			return r.cfg.Client.FailTask(ctx, t.ID, t.Lease, reason, false)
		})
	}
	switch {
	case rerr == nil:
		log.Info(msg, args...)
	case client.IsConflict(rerr) || client.IsNotFound(rerr):
		// Fenced: the lease expired or the instance stopped meanwhile, and
		// whoever holds the step now decides.
		log.Debug(msg+", not recorded: the worker no longer holds the task", append(args, "report_err", rerr)...)
	default:
		log.Warn(msg+", not recorded: the lease expires and the task runs again", append(args, "report_err", rerr)...)
	}
}

// report sends the outcome, retrying transport and server errors with
// backoff while the lease lasts; a refusal (4xx) is final.
func (r *runner) report(ctx context.Context, lease *leaseClock, send func(context.Context) error) error {
	for failures := 1; ; failures++ {
		err := send(ctx)
		code := client.StatusCode(err)
		if err == nil || (code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests) || ctx.Err() != nil {
			return err
		}
		d := backoff(failures)
		if time.Now().Add(d).After(lease.get()) {
			return err
		}
		r.log.Debug("reporting a task outcome", "err", err, "retry_in", d.Round(time.Millisecond))
		sleep(ctx, d)
	}
}

// call runs the handler; a panic is a failed attempt, an empty output is null
// and an output that is not JSON fails the step.
func (r *runner) call(ctx context.Context, t Task) (out json.RawMessage, err error) {
	if w, ok := r.cfg.Workflows[t.Handler]; ok && t.Kind == task.KindWorkflow {
		if out, err = r.runWorkflow(ctx, t, w); err == nil && len(bytes.TrimSpace(out)) == 0 {
			out = json.RawMessage("null")
		}
		return out, err
	}
	h, ok := r.cfg.Handlers[t.Handler]
	if !ok {
		return nil, Permanent(fmt.Errorf("no handler %q on worker %s", t.Handler, r.cfg.Name))
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	out, err = h(ctx, t)
	if err == nil && len(bytes.TrimSpace(out)) == 0 {
		out = json.RawMessage("null")
	}
	if err == nil && !json.Valid(out) {
		err = Permanent(errors.New("handler returned invalid JSON"))
	}
	return out, err
}

// leaseClock is the current lease expiry, moved by heartbeats and read by
// report.
type leaseClock struct {
	mu    sync.Mutex
	until time.Time
}

func (l *leaseClock) get() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *leaseClock) set(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = t
}

// keepLease extends the lease at a third of what is left of it until ctx
// ends, and cancels the handler's context when the lease is lost (409 or 404
// on a heartbeat) or runs out. Expiry times are the server's; the clocks of
// worker and server are assumed to agree to well within a lease.
func (r *runner) keepLease(ctx context.Context, cancel context.CancelCauseFunc, t Task, lease *leaseClock, log *slog.Logger) {
	until := t.LeaseUntil
	expiry := time.NewTimer(time.Until(until))
	defer expiry.Stop()
	capped := false // the attempt's deadline caps the lease: heartbeats cannot move it
	for {
		var next <-chan time.Time
		var tick *time.Timer
		if !capped {
			tick = time.NewTimer(max(time.Until(until)/3, 50*time.Millisecond))
			next = tick.C
		}
		select {
		case <-ctx.Done():
		case <-expiry.C:
			if capped {
				cancel(errTimedOut)
			} else {
				cancel(errLeaseExpired)
			}
		case <-next:
		}
		if tick != nil {
			tick.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		newUntil, err := r.cfg.Client.Heartbeat(ctx, t.ID, t.Lease, r.cfg.Lease.Seconds())
		switch {
		case ctx.Err() != nil:
			return
		case client.IsConflict(err) || client.IsNotFound(err):
			cancel(fmt.Errorf("lost the lease: %w", err))
			return
		case err != nil:
			// Try again sooner: a third of what is left.
			log.Warn("heartbeat failed", "err", err, "lease_until", until)
		case !newUntil.After(until):
			capped = true
		default:
			until = newUntil
			lease.set(until)
			expiry.Reset(time.Until(until))
		}
	}
}
