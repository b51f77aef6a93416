// Package engine runs workflow definitions: it starts instances, schedules
// ready steps as leased tasks, runs them on in-process handlers or hands them to
// remote workers, applies completions and failures with retries, and sweeps
// timeouts and expired leases.
//
// The workflow rules — what is ready, how a step is scheduled, when an
// instance settles, retries and backoff, fencing, what each action does —
// live in one pure package, engine/rules, tested without a database. The
// engine reads what a decision needs, asks the rules, and writes what they
// return; it keeps the I/O: transactions, the group commit, notifications,
// the handlers and metrics.
//
// Every state change is read, decided by the rules (engine/rules) outside any
// transaction, and written with one guarded store write (Apply, ApplyGroup,
// ApplyEach) that locks rows in a fixed order — task rows first, then their
// instance — so concurrent completions, sweeps and actions on any number of
// nodes cannot deadlock. The engine knows no SQL: it calls store.Backend.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/tracing"
	"github.com/flowd/flowd/worker/task"
	"github.com/flowd/flowd/workflow"
)

// Errors of the engine; the API maps them to status codes. They are the
// rules' errors (engine/rules), where the checks that return them live.
var (
	// ErrLeaseLost: the lease is stale, expired or revoked, or the task is no
	// longer active. The caller's work is not recorded (fencing): 409.
	ErrLeaseLost = rules.ErrLeaseLost
	// ErrNotRunning: the instance is not RUNNING or PAUSED, so its tasks were
	// released: 409.
	ErrNotRunning = rules.ErrNotRunning
	// ErrStepNotReady: a step cannot be completed from outside in its status: 409.
	ErrStepNotReady = rules.ErrStepNotReady
	// ErrActionNotAllowed: an action does not apply to the current status: 409.
	ErrActionNotAllowed = rules.ErrActionNotAllowed
)

// Task is what a handler receives: the attempt as remote workers see it
// (package worker), so that one handler runs in either.
type Task = task.Task

// The kinds of task a worker is delivered (task.KindStep, task.KindWorkflow).
const (
	KindStep     = task.KindStep
	KindWorkflow = task.KindWorkflow
)

// Handler runs one attempt of a task step and returns its output. An error
// fails the attempt; wrap it with Permanent to fail the step without retrying.
type Handler = task.Handler

// leased is a task this node claimed, as its in-process worker runs it: the
// handler's Task, with the claimed row (for the claim transaction) and the
// instance as the transaction that leased it left it: the base of a
// completion in one guarded write decided without reading
// (commitCompletion).
type leased struct {
	Task
	row  *store.Task
	inst *workflow.Instance
}

// Permanent marks err as not worth retrying (task.Permanent: the same mark
// for remote and in-process handlers).
func Permanent(err error) error { return task.Permanent(err) }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool { return task.IsPermanent(err) }

// Config configures an Engine. Zero values take the defaults in brackets.
type Config struct {
	Store   store.Backend
	Logger  *slog.Logger
	Metrics *metrics.Metrics // optional
	// Workers is the in-process step concurrency [8]; 0 runs no in-process
	// workers (sleep and http steps then need another node).
	Workers *int
	// Lease is the lease of in-process steps and the default for remote ones [30s].
	Lease time.Duration
	// SweepInterval is how often timeouts, expired leases and abandoned children are swept [1s].
	SweepInterval time.Duration
	// PollInterval is the fallback claim interval when nothing wakes the
	// workers [500ms].
	PollInterval time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time
	// NodeID names this process in lease owners [a random id].
	NodeID string
	// HTTPClient, when set, makes the calls definitions ask for (http
	// steps, Serverless Workflow call: http and call: openapi) instead of
	// the client of OutboundAllow's policy: its transport alone decides
	// what they reach, so it suits test stubs, not untrusted definitions
	// [the outbound policy's client, with a 30s timeout]. Setting it with
	// OutboundAllow is an error.
	HTTPClient *http.Client
	// MaxStateBytes bounds an instance's stored state after a change a
	// client or a handler makes: a start, a step completed from outside, a
	// task's output [DefaultMaxStateBytes]. Negative is an error.
	MaxStateBytes int
	// Retention is how long a finished instance (COMPLETED, FAILED,
	// CANCELLED, TIMED_OUT) is kept after its last change before the
	// sweeper deletes it; a definition's own `retention` replaces it for
	// its instances [0: kept for ever]. Negative is an error.
	Retention time.Duration
	// EventRetention is how long a published event is kept: a wait step
	// that starts waiting later takes it while it is [DefaultEventRetention,
	// 24h]. Negative is an error.
	EventRetention time.Duration
	// ScheduleInterval is how often the scheduler looks for due fire
	// times of the schedules (schedules.go) [1s].
	ScheduleInterval time.Duration
	// OutboundAllow opens addresses to the calls definitions ask for (http
	// steps, Serverless Workflow call: http and call: openapi: the document
	// fetch and the operation call). Without it they reach only globally
	// routable addresses that are not this host's: loopback, private,
	// link-local (cloud metadata), unspecified, multicast and the other
	// reserved ranges are refused, checked on the address dialled, on
	// every redirect hop. Entries are those of `flowd serve
	// --outbound-allow`: "CIDR", "HOST" or "HOST:PORT", comma-separated
	// lists too; "*" turns the check off; "127.0.0.0/8" and "::1" open
	// loopback [nothing opened]. A bad entry is an error of New.
	OutboundAllow []string
	// TracerProvider, when not nil, traces step attempts (tracing.go) and
	// stores the trace a workflow is started in with it; nil traces nothing.
	TracerProvider trace.TracerProvider

	// MaxVersions bounds the versions of an instance: the engine's
	// decision that would leave it no room for more fails it instead, with
	// an error naming the limit (engine/rules/limits.go)
	// [DefaultMaxVersions]. Negative is an error.
	MaxVersions int
	// MaxDescendants bounds the child workflows, and their descendants,
	// started under one top-level workflow: the instance that would start
	// one more fails instead, with an error naming the limit
	// [DefaultMaxDescendants]. Negative is an error.
	MaxDescendants int
}

// DefaultMaxVersions is Config.MaxVersions when it is 0.
const DefaultMaxVersions = 100000

// DefaultMaxDescendants is Config.MaxDescendants when it is 0.
const DefaultMaxDescendants = 10000

// DefaultMaxStateBytes is Config.MaxStateBytes when it is 0: 4 MiB.
const DefaultMaxStateBytes = 4 << 20

// Engine orchestrates definition-based workflow instances.
type Engine struct {
	st       store.Backend
	defs     store.DefinitionStore
	log      *slog.Logger
	m        *metrics.Metrics
	workers  int
	lease    time.Duration
	sweep    time.Duration
	poll     time.Duration
	now      func() time.Time
	node     string
	http     *http.Client
	handlers map[string]Handler
	maxState int
	// retention is Config.Retention; expiry schedules its sweep
	// (retention.go).
	retention time.Duration
	expiry    retentionSweep
	// eventRetention is Config.EventRetention (events.go).
	eventRetention time.Duration
	// scheduleEvery is Config.ScheduleInterval (schedules.go).
	scheduleEvery time.Duration
	// decide holds the rules with this engine's ids, jitter, state bound
	// and gate of decoded documents.
	decide rules.Env
	// tracer is nil when tracing is off (tracing.go).
	tracer trace.Tracer

	cacheMu sync.Mutex
	cache   map[defKey]*compiled
	// latest is, per definition name, the latest revision this node has
	// seen: a start uses it without a read, guarded by
	// CreateParams.LatestRevision.
	latest map[string]*compiled

	wakeMu  sync.Mutex
	waiters map[chan struct{}]struct{}
	// tokenWake wakes the waiters when a rate limit's next token is due.
	tokenWake tokenWake

	runMu   sync.Mutex
	cancel  context.CancelCauseFunc
	done    chan struct{}
	started bool

	// draining is closed when a shutdown begins: nothing new is claimed, and
	// long polls answer "no task" at once. stopClaiming ends the worker
	// loops' claims, the sweeper and the listener (set by Start).
	draining     chan struct{}
	drainOnce    sync.Once
	stopClaiming context.CancelFunc
	// running counts the in-process handlers in flight: a shutdown that
	// reaches its deadline with none has cut nothing short.
	running atomic.Int64

	// commits feeds the committers (commit.go) while the workers run; set
	// by Start before any worker starts, nil without workers.
	commits *commitQueues
	// group lets starts join the committers while they run (nil before).
	group atomic.Pointer[commitGroup]
	// written is what the committers wrote last (lastwritten.go).
	written lastWritten
	// runs are the code workflow runs' cursors (runcursor.go).
	runs runCursors

	// seen is, per worker name, the last record of it this node wrote
	// (workers.go); lastPrune is when the sweeper last deleted old ones.
	seenMu    sync.Mutex
	seen      map[string]workerSeen
	lastPrune time.Time

	// turns serialise this node's decisions about one instance: always on a
	// store with one writer, under contention on one with many (turns.go).
	turns turns
	// decideHook, set by tests only, runs where a decision gets its rules
	// (rulesFor), before they evaluate anything: a test holds a decision
	// there to see what waits for it.
	decideHook atomic.Pointer[func(context.Context)]
	// cascadeWake asks the sweeper to cancel abandoned children now
	// (cascade.go).
	cascadeWake chan struct{}
	// maxDescendants is Config.MaxDescendants (child.go).
	maxDescendants int
	// bulkWake asks the bulk worker to look for bulk operations now
	// (bulk.go); bulkHook, set by tests only, runs where a bulk
	// operation's write of an instance has checked the filter on the
	// instance read, before it writes.
	bulkWake chan struct{}
	bulkHook atomic.Pointer[func(ctx context.Context, id string)]
}

type defKey struct {
	name string
	rev  int
}

// New checks cfg and returns an engine; Start runs it.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("engine: Config.Store is required")
	}
	defs, ok := cfg.Store.(store.DefinitionStore)
	if !ok {
		return nil, fmt.Errorf("engine: store %s does not store definitions", cfg.Store.Capabilities().Name)
	}
	e := &Engine{
		st: cfg.Store, defs: defs, log: cfg.Logger, m: cfg.Metrics,
		workers: 8, lease: cfg.Lease, sweep: cfg.SweepInterval, poll: cfg.PollInterval,
		now: cfg.Now, node: cfg.NodeID, http: cfg.HTTPClient, maxState: cfg.MaxStateBytes, retention: cfg.Retention,
		eventRetention: cfg.EventRetention,
		handlers:       map[string]Handler{},
		cache:          map[defKey]*compiled{},
		latest:         map[string]*compiled{},
		waiters:        map[chan struct{}]struct{}{},
		draining:       make(chan struct{}),
		seen:           map[string]workerSeen{},
		cascadeWake:    make(chan struct{}, 1),
		bulkWake:       make(chan struct{}, 1),
	}
	if cfg.Workers != nil {
		if *cfg.Workers < 0 {
			return nil, fmt.Errorf("engine: Workers must not be negative, got %d", *cfg.Workers)
		}
		e.workers = *cfg.Workers
	}
	if e.maxState < 0 {
		return nil, fmt.Errorf("engine: MaxStateBytes must not be negative, got %d", e.maxState)
	}
	if e.maxState == 0 {
		e.maxState = DefaultMaxStateBytes
	}
	maxVersions := cfg.MaxVersions
	if maxVersions < 0 {
		return nil, fmt.Errorf("engine: MaxVersions must not be negative, got %d", maxVersions)
	}
	if maxVersions == 0 {
		maxVersions = DefaultMaxVersions
	}
	if e.maxDescendants = cfg.MaxDescendants; e.maxDescendants < 0 || e.maxDescendants > math.MaxInt32 {
		return nil, fmt.Errorf("engine: MaxDescendants must not be negative nor above %d, got %d", math.MaxInt32, e.maxDescendants)
	}
	if e.maxDescendants == 0 {
		e.maxDescendants = DefaultMaxDescendants
	}
	if e.retention < 0 {
		return nil, fmt.Errorf("engine: Retention must not be negative, got %s", e.retention)
	}
	if e.eventRetention < 0 {
		return nil, fmt.Errorf("engine: EventRetention must not be negative, got %s", e.eventRetention)
	}
	if e.eventRetention == 0 {
		e.eventRetention = DefaultEventRetention
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.lease <= 0 {
		e.lease = 30 * time.Second
	}
	if e.sweep <= 0 {
		e.sweep = time.Second
	}
	if e.scheduleEvery = cfg.ScheduleInterval; e.scheduleEvery <= 0 {
		e.scheduleEvery = time.Second
	}
	if e.poll <= 0 {
		e.poll = 500 * time.Millisecond
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.node == "" {
		e.node = "node-" + store.NewID()[24:]
	}
	e.decide = rules.Env{NewID: store.NewID, Jitter: rand.Float64, MaxStateBytes: e.maxState}
	e.decide.MaxVersions = maxVersions
	// One gate for every decision of this engine (of the node): the
	// documents its expressions decode take turns within it.
	e.decide.Docs = workflow.NewDocGate(e.maxState)
	if err := e.outboundClient(cfg); err != nil {
		return nil, err
	}
	if cfg.TracerProvider != nil {
		e.tracer = cfg.TracerProvider.Tracer(tracing.TracerName)
	}
	return e, nil
}

// outboundClient sets the client of the calls definitions ask for: the
// one given, or one of the outbound policy OutboundAllow opens.
func (e *Engine) outboundClient(cfg Config) error {
	if cfg.HTTPClient != nil {
		if len(cfg.OutboundAllow) > 0 {
			return errors.New("engine: set HTTPClient or OutboundAllow, not both (HTTPClient's transport decides what calls reach)")
		}
		return nil
	}
	policy, err := outbound.Parse(cfg.OutboundAllow)
	if err != nil {
		return fmt.Errorf("engine: OutboundAllow: %w", err)
	}
	if vars := policy.IgnoredProxyVariables(); len(vars) > 0 {
		e.log.Warn("the proxy variables are ignored by the calls definitions make: a proxy would dial out of the outbound policy's sight (--outbound-allow '*' turns the policy off and uses them)", "variables", vars)
	}
	e.http = policy.Client(30 * time.Second)
	return nil
}

// CheckStateSize reports a state larger than Config.MaxStateBytes once
// stored, with an error wrapping workflow.ErrStateTooLarge. The engine checks
// the states its starts and completions write; the API checks the states it
// writes itself (a free-form create, a merge patch) with it.
func (e *Engine) CheckStateSize(s workflow.State) error { return s.CheckSize(e.maxState) }

// Register adds an in-process handler for task steps whose handler is name.
// Call it before Start.
func (e *Engine) Register(name string, h Handler) {
	e.handlers[name] = h
}

// Start runs the in-process workers, the sweeper and (on PostgreSQL) the
// listener that wakes this node when another one schedules work. It returns
// at once; Shutdown or Stop ends everything.
func (e *Engine) Start(ctx context.Context) error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.started {
		return errors.New("engine: already started")
	}
	e.started = true
	// Two lifetimes: runCtx bounds the handlers in flight, claimCtx ends as
	// soon as a shutdown begins so that nothing new is started meanwhile.
	// The writes of the engine's own loops are the engine's, whoever
	// started it.
	runCtx, cancel := context.WithCancelCause(store.WithActor(context.WithoutCancel(ctx), store.ActorEngine))
	claimCtx, stopClaiming := context.WithCancel(runCtx)
	e.cancel, e.stopClaiming = cancel, stopClaiming
	e.done = make(chan struct{})
	select {
	case <-e.draining: // shut down before it started
		stopClaiming()
	default:
	}
	var wg sync.WaitGroup
	if l, ok := e.st.(store.Listener); ok {
		ch, err := l.Listen(claimCtx)
		if err != nil {
			cancel(err)
			return fmt.Errorf("engine: listening for notifications: %w", err)
		}
		wg.Go(func() {
			for range ch {
				e.wake()
			}
		})
	}
	wg.Go(func() { e.sweeper(claimCtx) })
	wg.Go(func() { e.scheduler(claimCtx) })
	wg.Go(func() { e.bulkWorker(claimCtx) })
	if e.workers > 0 {
		e.commits = newCommitQueues(committers)
		// The group is in place before Start returns: a start right after
		// it goes through the committers, as every later one does.
		groupDone := make(chan struct{})
		e.group.Store(&commitGroup{reqs: e.commits, done: groupDone})
		wg.Go(func() { e.runWorkers(claimCtx, runCtx, groupDone) })
	}
	go func() {
		wg.Wait()
		close(e.done)
	}()
	e.log.Info("engine started", "node", e.node, "workers", e.workers, "handlers", len(e.handlers))
	return nil
}

// Shutdown stops the engine gracefully. At once, nothing new is claimed and
// long polls (Poll) return no task. The in-process handlers in flight keep
// running, and their outcomes are recorded, until they finish or ctx ends;
// then the handlers still running get their context cancelled and their tasks
// are released, so another node (or this one after a restart) takes them at
// once instead of after their lease. Shutdown returns nil when every handler
// finished in time, else an error wrapping the cause of ctx's end. Calls
// after the first wait again; Shutdown before Start only makes Poll answer at
// once.
func (e *Engine) Shutdown(ctx context.Context) error {
	if e.shutdown(ctx.Done()) {
		return nil
	}
	return fmt.Errorf("engine: handlers still running at the shutdown deadline were cancelled and their tasks released: %w", context.Cause(ctx))
}

// Stop ends the engine at once: like Shutdown with a deadline already past.
// Handlers still running get their context cancelled; their leases are
// released so another node can take the tasks at once. Stop is idempotent.
func (e *Engine) Stop() {
	now := make(chan struct{})
	close(now)
	e.shutdown(now)
}

// shutdown drains, waits for the workers until deadline is closed, then
// cancels the handlers and waits for their releases. It reports whether
// everything ended before the deadline.
func (e *Engine) shutdown(deadline <-chan struct{}) bool {
	e.drainOnce.Do(func() { close(e.draining) })
	e.runMu.Lock()
	cancel, stopClaiming, done := e.cancel, e.stopClaiming, e.done
	e.runMu.Unlock()
	if cancel == nil {
		return true
	}
	stopClaiming()
	select {
	case <-done:
		return true
	default:
	}
	select {
	case <-done:
		return true
	case <-deadline:
	}
	// Idle loops may not have seen the drain yet; only handlers in flight
	// make this shutdown a cut-short one.
	cut := e.running.Load() > 0
	cancel(errors.New("engine stopped"))
	select {
	case <-done:
	case <-time.After(stopGrace):
		// A handler that ignores its context cannot be waited for forever; its
		// lease expires and another node runs the attempt again.
		e.log.Warn("engine stopped with handlers still running", "waited", stopGrace)
	}
	return !cut
}

// stopGrace bounds how long Stop waits for running handlers.
const stopGrace = 15 * time.Second

// wake tells every waiting worker and long poll to look for work now.
func (e *Engine) wake() {
	e.wakeMu.Lock()
	defer e.wakeMu.Unlock()
	for ch := range e.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// waiter registers a wake-up channel; release it when done.
func (e *Engine) waiter() (ch chan struct{}, release func()) {
	ch = make(chan struct{}, 1)
	e.wakeMu.Lock()
	e.waiters[ch] = struct{}{}
	e.wakeMu.Unlock()
	return ch, func() {
		e.wakeMu.Lock()
		delete(e.waiters, ch)
		e.wakeMu.Unlock()
	}
}

func (e *Engine) clock() time.Time { return store.Timestamp(e.now()) }

func (e *Engine) countCompleted(result string) {
	if e.m != nil {
		e.m.TasksCompleted.WithLabelValues(result).Inc()
	}
}
