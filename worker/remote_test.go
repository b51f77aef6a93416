package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// bundle is a flowd server whose engine runs no steps itself (zero in-process
// workers), over a fresh in-memory SQLite store: every task step must be run
// by a remote worker through the tasks API.
type bundle struct {
	url    string
	client *client.Client
}

func setup(t *testing.T, tokens ...string) *bundle {
	t.Helper()
	return setupServer(t, 0, tokens...)
}

// setupServer is setup with that many in-process workers, which serve the
// engine's own queues (timers) and no handler.
func setupServer(t *testing.T, workers int, tokens ...string) *bundle {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, "sqlite::memory:", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Store: st, Workers: &workers, Lease: 10 * time.Second,
		// Every long poll claims (a write transaction on SQLite's one write
		// connection) on each tick: keep that traffic low, so heartbeats
		// are not stuck behind it on a loaded machine.
		SweepInterval: 200 * time.Millisecond, PollInterval: 250 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	api, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng, Tokens: httpapi.AdminTokens(tokens...)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	var opts []client.Option
	if len(tokens) > 0 {
		opts = append(opts, client.WithToken(tokens[0]))
	}
	return &bundle{url: srv.URL, client: client.New(srv.URL, opts...)}
}

func (b *bundle) define(t *testing.T, yaml string) {
	t.Helper()
	def, err := workflow.ParseDefinition([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.client.PutDefinition(t.Context(), def.Name, []byte(yaml)); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) start(t *testing.T, def, id, input string) {
	t.Helper()
	req := api.CreateWorkflowRequest{ID: id, Definition: def}
	if input != "" {
		req.Input = json.RawMessage(input)
	}
	if _, err := b.client.CreateWorkflow(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}

// waitStatus polls the instance until it has status, and fails the test
// after timeout.
func (b *bundle) waitStatus(t *testing.T, id string, status workflow.Status, timeout time.Duration) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		inst, err := b.client.GetWorkflow(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == status {
			return inst
		}
		if time.Now().After(deadline) {
			steps, _ := json.Marshal(inst.State.Steps)
			t.Fatalf("workflow %s is %s after %s, want %s; steps: %s", id, inst.Status, timeout, status, steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startWorker runs worker.Run until the returned stop is called (or the test
// ends); stop returns Run's result.
func startWorker(t *testing.T, cfg worker.Config) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- worker.Run(ctx, cfg) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(20 * time.Second):
				err = errors.New("worker.Run did not return within 20s of its context ending")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return stop
}

// handlers returns the demo handlers plus extra.
func handlers(extra map[string]worker.Handler) map[string]worker.Handler {
	hs := worker.DemoHandlers()
	for k, v := range extra {
		hs[k] = v
	}
	return hs
}

// logRecorder keeps every log record, to check what the worker says.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler { return &withAttrs{l, attrs} }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

type withAttrs struct {
	*logRecorder
	attrs []slog.Attr
}

func (w *withAttrs) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(w.attrs...)
	return w.logRecorder.Handle(ctx, r)
}

// find returns the records whose message is msg (exact) or starts with it,
// as "LEVEL msg key=value …" lines.
func (l *logRecorder) find(msg string, exact ...bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if !strings.HasPrefix(r.Message, msg) || (len(exact) > 0 && exact[0] && r.Message != msg) {
			continue
		}
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

const pipelineYAML = `
name: pipeline
steps:
  - {id: greet, type: task, handler: echo, input: {msg: "{{ .input.msg }}"}}
  - id: flaky
    type: task
    handler: flaky
    depends_on: [greet]
    input: {msg: "{{ .steps.greet.output.msg }}"}
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 50ms}
  - id: panicky
    type: task
    handler: panicky
    depends_on: [greet]
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 50ms}
  - {id: nap, type: task, handler: sleep, depends_on: [flaky, panicky], input: {ms: 4000}}
  - {id: last, type: task, handler: echo, depends_on: [nap], input: "{{ .steps.nap.output }}"}
`

const doomedYAML = `
name: doomed
steps:
  - {id: greet, type: task, handler: echo, input: {n: 1}}
  - id: boom
    type: task
    handler: fail
    depends_on: [greet]
    input: {message: "out of stock", permanent: false}
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 20ms}
  - {id: never, type: task, handler: echo, depends_on: [boom]}
`

const declinedYAML = `
name: declined
steps:
  - id: charge
    type: task
    handler: fail
    input: {message: "card declined", permanent: true}
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 20ms}
`

// The whole path: workflows whose every step runs on a remote worker complete;
// failed attempts and panics are retried; a step longer than the lease
// survives on heartbeats; exhausted and permanent failures fail the workflow.
func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, pipelineYAML)
	b.define(t, doomedYAML)
	b.define(t, declinedYAML)
	flaky := func(_ context.Context, task worker.Task) (json.RawMessage, error) {
		if task.Attempt == 1 {
			return nil, errors.New("transient trouble")
		}
		return task.Input, nil
	}
	panicky := func(_ context.Context, task worker.Task) (json.RawMessage, error) {
		if task.Attempt == 1 {
			panic("first attempts always panic")
		}
		return json.RawMessage(`{"ok":true}`), nil
	}
	logs := &logRecorder{}
	startWorker(t, worker.Config{
		Client: b.client, Name: "e2e", Logger: slog.New(logs), Wait: 2 * time.Second, Concurrency: 2,
		Handlers: map[string]worker.Handler{"echo": worker.Echo, "fail": worker.Fail, "flaky": flaky, "panicky": panicky},
	})
	// Sleeps go to a second worker with a short lease, which only heartbeats
	// keep alive for the length of a nap.
	startWorker(t, worker.Config{
		Client: b.client, Name: "e2e-sleep", Logger: slog.New(logs), Wait: 2 * time.Second,
		Handlers: map[string]worker.Handler{"sleep": worker.Sleep}, Lease: 3 * time.Second,
	})

	const n = 4
	for i := range n {
		b.start(t, "pipeline", fmt.Sprintf("p%d", i), fmt.Sprintf(`{"msg":"hello %d"}`, i))
	}
	b.start(t, "doomed", "d", "")
	b.start(t, "declined", "c", "")

	for i := range n {
		inst := b.waitStatus(t, fmt.Sprintf("p%d", i), workflow.StatusCompleted, 20*time.Second)
		steps := inst.State.Steps
		if got, want := string(steps["flaky"].Output), fmt.Sprintf(`{"msg":"hello %d"}`, i); got != want {
			t.Errorf("p%d flaky output %s, want %s", i, got, want)
		}
		if steps["flaky"].Attempts != 2 || steps["panicky"].Attempts != 2 {
			t.Errorf("p%d: a failed or panicking first attempt is retried once: flaky %d, panicky %d attempts",
				i, steps["flaky"].Attempts, steps["panicky"].Attempts)
		}
		// 4s of sleep on a 3s lease: only heartbeats kept the attempt alive.
		if steps["nap"].Attempts != 1 || string(steps["last"].Output) != `{"slept_ms":4000}` {
			t.Errorf("p%d: nap %d attempts, last output %s", i, steps["nap"].Attempts, steps["last"].Output)
		}
	}
	d := b.waitStatus(t, "d", workflow.StatusFailed, 20*time.Second)
	if boom := d.State.Steps["boom"]; boom.Status != workflow.StepFailed || boom.Attempts != 3 || boom.Error != "out of stock" {
		t.Errorf("a retryable failure uses up its attempts: %+v", boom)
	}
	if never := d.State.Steps["never"]; never.Status != workflow.StepPending {
		t.Errorf("the step after the failed one: %+v", never)
	}
	c := b.waitStatus(t, "c", workflow.StatusFailed, 20*time.Second)
	if charge := c.State.Steps["charge"]; charge.Status != workflow.StepFailed || charge.Attempts != 1 || charge.Error != "card declined" {
		t.Errorf("a permanent failure is not retried: %+v", charge)
	}

	if t.Failed() {
		logs.mu.Lock()
		for _, r := range logs.records {
			if r.Level != slog.LevelInfo {
				line := r.Time.Format("15:04:05.000") + " " + r.Level.String() + " " + r.Message
				r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
				t.Log(line)
			}
		}
		logs.mu.Unlock()
	}
	// One line per task: 5 steps per pipeline, 1 in doomed. The server
	// commits a workflow's last completion before its worker reads the
	// answer and logs it, so the last line may come after the status.
	completed := func() []string { return logs.find("task completed", true) }
	for deadline := time.Now().Add(5 * time.Second); len(completed()) < n*5+1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := completed(); len(got) != n*5+1 {
		t.Errorf("%d 'task completed' lines, want %d:\n%s", len(got), n*5+1, strings.Join(got, "\n"))
	}
	failed := strings.Join(logs.find("task failed"), "\n")
	for _, want := range []string{"handler panicked: first attempts always panic", "transient trouble", "retryable=true", "card declined", "retryable=false"} {
		if !strings.Contains(failed, want) {
			t.Errorf("the 'task failed' lines do not mention %q:\n%s", want, failed)
		}
	}
}

// A worker stopped mid-task abandons it without reporting; the server hands it
// out again only once its lease has expired, as the next attempt.
func TestRunRedeliversAbandonedTaskAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: slow
steps:
  - {id: s, type: task, handler: slow, input: {n: 1}}
`)
	type started struct {
		task worker.Task
		at   time.Time
	}
	firstStarted := make(chan started, 1)
	firstStopped := make(chan error, 1)
	block := func(ctx context.Context, task worker.Task) (json.RawMessage, error) {
		firstStarted <- started{task, time.Now()}
		<-ctx.Done()
		firstStopped <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	}
	stopA := startWorker(t, worker.Config{
		Client: b.client, Name: "a", Handlers: map[string]worker.Handler{"slow": block},
		Lease: 2 * time.Second, Wait: time.Second, ShutdownGrace: -1,
	})
	b.start(t, "slow", "w", "")
	var first started
	select {
	case first = <-firstStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("worker a never got the task")
	}
	stoppedAt := time.Now()
	if err := stopA(); err != nil {
		t.Fatalf("Run after its context ended: %v", err)
	}
	if d := time.Since(stoppedAt); d > 2*time.Second {
		t.Errorf("stopping with no grace took %s", d)
	}
	if cause := <-firstStopped; cause == nil || !strings.Contains(cause.Error(), "abandon") {
		t.Errorf("the abandoned handler's context ended with %v", cause)
	}

	var second atomic.Pointer[started]
	startWorker(t, worker.Config{
		Client: b.client, Name: "b", Wait: time.Second,
		Handlers: map[string]worker.Handler{"slow": func(_ context.Context, task worker.Task) (json.RawMessage, error) {
			second.Store(&started{task, time.Now()})
			return json.RawMessage(`{"by":"b"}`), nil
		}},
	})
	inst := b.waitStatus(t, "w", workflow.StatusCompleted, 15*time.Second)
	if s := inst.State.Steps["s"]; s.Attempts != 2 || string(s.Output) != `{"by":"b"}` {
		t.Errorf("step after re-delivery: %+v", s)
	}
	got := second.Load()
	if got.task.Attempt != 2 || got.task.IdempotencyKey != first.task.IdempotencyKey || got.task.ID != first.task.ID || got.task.Lease == first.task.Lease {
		t.Errorf("re-delivered task %+v; first was %+v", got.task, first.task)
	}
	// Not before the first lease (which no heartbeat extended: a's heartbeat
	// would have come after a third of it) ran out.
	if got.at.Before(first.task.LeaseUntil) {
		t.Errorf("re-delivered at %s, before the abandoned lease expired at %s", got.at, first.task.LeaseUntil)
	}
}

// A heartbeat answered 409 — here because the workflow was cancelled — stops
// the handler; the worker goes on serving.
func TestRunHeartbeatConflictCancelsHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: blocker
steps:
  - {id: s, type: task, handler: block}
`)
	b.define(t, `
name: quick
steps:
  - {id: s, type: task, handler: echo, input: {ok: true}}
`)
	running := make(chan struct{}, 1)
	causes := make(chan error, 1)
	logs := &logRecorder{}
	startWorker(t, worker.Config{
		Client: b.client, Lease: 3 * time.Second, Wait: time.Second, Logger: slog.New(logs), Concurrency: 2,
		Handlers: handlers(map[string]worker.Handler{"block": func(ctx context.Context, _ worker.Task) (json.RawMessage, error) {
			running <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		}}),
	})
	b.start(t, "blocker", "w", "")
	<-running
	if _, err := b.client.Action(t.Context(), "w", "cancel"); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if !client.IsConflict(cause) || !strings.Contains(cause.Error(), "lost the lease") {
			t.Errorf("handler context ended with %v, want the heartbeat's 409", cause)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the handler was not cancelled after its workflow was")
	}
	b.start(t, "quick", "q", "")
	b.waitStatus(t, "q", workflow.StatusCompleted, 10*time.Second)
	if got := logs.find("task dropped"); len(got) != 1 || !strings.Contains(got[0], "409") {
		t.Errorf("task dropped lines: %q", got)
	}
}

// A result that arrives after the worker lost the task is answered 409: it is
// logged at debug and ignored, and the worker goes on serving.
func TestRunIgnoresFencedCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: stubborn
steps:
  - {id: s, type: task, handler: stubborn}
  - {id: t, type: task, handler: echo, depends_on: [s]}
`)
	b.define(t, `
name: quick
steps:
  - {id: s, type: task, handler: echo, input: {ok: true}}
`)
	running := make(chan struct{}, 1)
	release := make(chan struct{})
	logs := &logRecorder{}
	startWorker(t, worker.Config{
		Client: b.client, Lease: 30 * time.Second, Wait: time.Second, Logger: slog.New(logs), Concurrency: 1,
		Handlers: handlers(map[string]worker.Handler{"stubborn": func(context.Context, worker.Task) (json.RawMessage, error) {
			running <- struct{}{}
			<-release // ignores its context
			return json.RawMessage(`{"late":true}`), nil
		}}),
	})
	b.start(t, "stubborn", "w", "")
	<-running
	if _, err := b.client.Action(t.Context(), "w", "cancel"); err != nil {
		t.Fatal(err)
	}
	close(release) // long before the first heartbeat, at 10s
	b.start(t, "quick", "q", "")
	b.waitStatus(t, "q", workflow.StatusCompleted, 10*time.Second)
	inst, err := b.client.GetWorkflow(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != workflow.StatusCancelled || inst.State.Steps["s"].Output != nil {
		t.Errorf("a fenced completion changed the workflow: %s %+v", inst.Status, inst.State.Steps["s"])
	}
	got := logs.find("task completed, not recorded")
	if len(got) != 1 || !strings.HasPrefix(got[0], "DEBUG ") || !strings.Contains(got[0], "409") {
		t.Errorf("fenced completion logged as %q, want one DEBUG line with the 409", got)
	}
}

// Once ctx ends, tasks in flight finish and are reported before Run returns.
func TestRunFinishesTasksInFlightOnShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: nap
steps:
  - {id: s, type: task, handler: nap, input: {ms: 400}}
`)
	running := make(chan struct{}, 1)
	stop := startWorker(t, worker.Config{
		Client: b.client, Wait: time.Second,
		Handlers: map[string]worker.Handler{"nap": func(ctx context.Context, task worker.Task) (json.RawMessage, error) {
			running <- struct{}{}
			return worker.Sleep(ctx, task)
		}},
	})
	b.start(t, "nap", "w", "")
	<-running
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %s for a 400ms task", d)
	}
	inst, err := b.client.GetWorkflow(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != workflow.StatusCompleted || string(inst.State.Steps["s"].Output) != `{"slept_ms":400}` {
		t.Errorf("the task in flight was not reported before Run returned: %s %+v", inst.Status, inst.State.Steps["s"])
	}
}

// No more than Concurrency handlers run at once.
func TestRunConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: busy
steps:
  - {id: s, type: task, handler: busy}
`)
	var active, peak atomic.Int32
	busy := func(ctx context.Context, _ worker.Task) (json.RawMessage, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(200 * time.Millisecond)
		return nil, nil
	}
	for i := range 9 {
		b.start(t, "busy", fmt.Sprintf("w%d", i), "")
	}
	startWorker(t, worker.Config{Client: b.client, Concurrency: 3, Wait: time.Second, Handlers: map[string]worker.Handler{"busy": busy}})
	for i := range 9 {
		inst := b.waitStatus(t, fmt.Sprintf("w%d", i), workflow.StatusCompleted, 15*time.Second)
		if out := string(inst.State.Steps["s"].Output); out != "null" {
			t.Errorf("an empty output is recorded as null, got %s", out)
		}
	}
	if p := peak.Load(); p < 2 || p > 3 {
		t.Errorf("peak of %d handlers at once with Concurrency 3", p)
	}
}

// Server errors are retried with a growing, jittered backoff — never in a
// tight loop — and the worker recovers when the server does.
func TestRunBacksOffOnServerErrors(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	var refused atomic.Int32
	down.Store(true)
	b, front := quickBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !down.Load() {
			return false
		}
		refused.Add(1)
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
		return true
	}, nil)
	startWorker(t, worker.Config{Client: client.New(front), Concurrency: 2, Wait: time.Second, Handlers: worker.DemoHandlers()})
	b.start(t, "quick", "q", "")

	time.Sleep(1500 * time.Millisecond)
	down.Store(false)
	// Per slot: waits of 50–100, 100–200, 200–400, 400–800ms… so at most 5
	// polls each in 1.5s.
	if n := refused.Load(); n < 2 || n > 10 {
		t.Errorf("%d polls in 1.5s of a 503-ing server from 2 slots", n)
	}
	b.waitStatus(t, "q", workflow.StatusCompleted, 15*time.Second)
}

// A server that refuses the worker outright (no token) is not retried: Run
// returns the error.
func TestRunRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, "s3cret")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := worker.Run(ctx, worker.Config{Client: client.New(b.url), Handlers: worker.DemoHandlers(), Wait: time.Second})
	if !client.IsUnauthorized(err) || ctx.Err() != nil {
		t.Errorf("Run without a token: %v", err)
	}
}

func TestRunConfig(t *testing.T) {
	t.Parallel()
	c := client.New("http://127.0.0.1:1")
	echo := map[string]worker.Handler{"echo": worker.Echo}
	for _, tc := range []struct {
		cfg  worker.Config
		want string
	}{
		{worker.Config{Handlers: echo}, "Client is required"},
		{worker.Config{Client: c}, "at least one handler"},
		{worker.Config{Client: c, Handlers: map[string]worker.Handler{"flowd:sleep": worker.Echo}}, `"flowd:sleep" is not a handler name`},
		{worker.Config{Client: c, Handlers: map[string]worker.Handler{"x": nil}}, `handler "x" is nil`},
		{worker.Config{Client: c, Handlers: echo, Concurrency: -1}, "Concurrency"},
		{worker.Config{Client: c, Handlers: echo, Lease: 10 * time.Millisecond}, "Lease"},
		{worker.Config{Client: c, Handlers: echo, Wait: 2 * time.Minute}, "Wait"},
	} {
		err := worker.Run(t.Context(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

// fakeTasks is a tasks API that hands out one task whose lease the test
// controls, and records what the worker sends.
type fakeTasks struct {
	lease    time.Duration
	deadline time.Time // caps every lease, like a step timeout; zero: none

	mu         sync.Mutex
	handedOut  bool
	heartbeats int
	results    []string // the routes of complete and fail calls
}

func (f *fakeTasks) leaseUntil() time.Time {
	until := time.Now().Add(f.lease)
	if !f.deadline.IsZero() && f.deadline.Before(until) {
		until = f.deadline
	}
	return until
}

func (f *fakeTasks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/tasks/poll" && !f.handedOut:
		f.handedOut = true
		json.NewEncoder(w).Encode(api.TaskResponse{
			TaskID: "t1", Lease: "l1", LeaseUntil: f.leaseUntil(), WorkflowID: "w", Step: "s",
			Handler: "block", Attempt: 1, Input: json.RawMessage(`{}`), IdempotencyKey: "w/s",
		})
	case r.URL.Path == "/v1/tasks/poll":
		f.mu.Unlock()
		sleep(r.Context(), 200*time.Millisecond)
		f.mu.Lock()
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/v1/tasks/t1/heartbeat":
		f.heartbeats++
		json.NewEncoder(w).Encode(api.HeartbeatResponse{TaskID: "t1", LeaseUntil: f.leaseUntil()})
	default:
		f.results = append(f.results, r.URL.Path)
		fmt.Fprint(w, `{}`)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (f *fakeTasks) counts() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats, append([]string(nil), f.results...)
}

// Heartbeats renew a short lease at a third of what is left of it, for as
// long as the handler runs.
func TestRunHeartbeatsKeepTheLease(t *testing.T) {
	t.Parallel()
	fake := &fakeTasks{lease: 600 * time.Millisecond}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	done := make(chan error, 1)
	stop := startWorker(t, worker.Config{
		Client: client.New(srv.URL), Concurrency: 1, Wait: time.Second,
		Handlers: map[string]worker.Handler{"block": func(ctx context.Context, _ worker.Task) (json.RawMessage, error) {
			sleep(ctx, 1500*time.Millisecond)
			done <- context.Cause(ctx)
			return nil, nil
		}},
	})
	if cause := <-done; cause != nil {
		t.Fatalf("the handler's context ended early: %v", cause)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// 1.5s on a 600ms lease renewed every 200ms or so.
	if beats, results := fake.counts(); beats < 3 || len(results) != 1 || results[0] != "/v1/tasks/t1/complete" {
		t.Errorf("%d heartbeats, results %v", beats, results)
	}
}

// When heartbeats no longer move the lease (the step's timeout caps it), the
// handler's context ends at the cap, and nothing is reported: the server
// fails the timed-out attempt itself.
func TestRunAttemptDeadline(t *testing.T) {
	t.Parallel()
	fake := &fakeTasks{lease: 600 * time.Millisecond, deadline: time.Now().Add(time.Second)}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	done := make(chan error, 1)
	stop := startWorker(t, worker.Config{
		Client: client.New(srv.URL), Concurrency: 1, Wait: time.Second,
		Handlers: map[string]worker.Handler{"block": func(ctx context.Context, _ worker.Task) (json.RawMessage, error) {
			<-ctx.Done()
			done <- context.Cause(ctx)
			return nil, ctx.Err()
		}},
	})
	select {
	case cause := <-done:
		if cause == nil || !strings.Contains(cause.Error(), "attempt timed out") {
			t.Errorf("the handler's context ended with %v", cause)
		}
		if late := time.Since(fake.deadline); late < 0 || late > 2*time.Second {
			t.Errorf("the handler's context ended %s after the attempt's deadline", late)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end at the attempt's deadline")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, results := fake.counts(); len(results) != 0 {
		t.Errorf("a timed-out attempt was reported: %v", results)
	}
}

// An output the server refuses (over its 1 MiB body limit) fails the step
// instead of being produced again on every attempt.
func TestRunOutputRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: big
steps:
  - {id: s, type: task, handler: big}
`)
	startWorker(t, worker.Config{
		Client: b.client, Wait: time.Second,
		Handlers: map[string]worker.Handler{"big": func(context.Context, worker.Task) (json.RawMessage, error) {
			return json.Marshal(strings.Repeat("x", api.MaxBodyBytes))
		}},
	})
	b.start(t, "big", "w", "")
	inst := b.waitStatus(t, "w", workflow.StatusFailed, 10*time.Second)
	if s := inst.State.Steps["s"]; s.Attempts != 1 || !strings.Contains(s.Error, "the server refused the handler's output: 413") {
		t.Errorf("step %+v", s)
	}
}

// A server that cannot be reached at start ends Run at once, naming the
// cause, instead of retrying forever.
func TestRunUnreachableServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	logs := &logRecorder{}
	err := worker.Run(ctx, worker.Config{Client: client.New("http://127.0.0.1:1"), Handlers: worker.DemoHandlers(), Logger: slog.New(logs)})
	var ue *url.Error
	if err == nil || !strings.Contains(err.Error(), "worker: cannot reach the server: ") || !strings.Contains(err.Error(), "connection refused") || !errors.As(err, &ue) {
		t.Errorf("Run against a closed port: %v", err)
	}
	if ctx.Err() != nil {
		t.Error("Run waited for its context instead of failing at once")
	}
	if w := logs.find("polling for tasks"); len(w) != 0 {
		t.Errorf("logged retries: %q", w)
	}
}

// A server that accepts the first polls and closes them unanswered (it is
// restarting) was reached: the worker retries, and runs the task once the
// server answers, instead of ending Run as for a server it cannot reach.
func TestRunFirstPollsClosedUnanswered(t *testing.T) {
	t.Parallel()
	var dropped atomic.Int32
	b, front := quickBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1/tasks/poll" || dropped.Add(1) > 3 {
			return false
		}
		closeUnanswered(w)
		return true
	}, nil)
	logs := &logRecorder{}
	stop := startWorker(t, worker.Config{Client: client.New(front), Concurrency: 1, Wait: time.Second,
		Handlers: worker.DemoHandlers(), Logger: slog.New(logs)})
	b.start(t, "quick", "q", "")
	b.waitStatus(t, "q", workflow.StatusCompleted, 15*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if w := logs.find("polling for tasks failed"); len(w) != 1 || !strings.Contains(w[0], "EOF") {
		t.Errorf("want one warning naming the EOF, got %q", w)
	}
}

// A server that goes away after the worker started is an outage: polls are
// retried, and the worker says so once when it starts and once when it ends,
// not once a slot a retry.
func TestRunOutageLoggedOnce(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	var answered, dropped atomic.Int32
	b, front := quickBehind(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !down.Load() {
			return false
		}
		// As a server that went away: the connection closes unanswered.
		dropped.Add(1)
		closeUnanswered(w)
		return true
	}, func() { answered.Add(1) })
	logs := &logRecorder{}
	startWorker(t, worker.Config{Client: client.New(front), Concurrency: 3, Wait: time.Second,
		Handlers: worker.DemoHandlers(), Logger: slog.New(logs)})
	waitFor(t, "a first poll answered", func() bool { return answered.Load() > 0 })
	down.Store(true)
	waitFor(t, "polls failing on every slot", func() bool { return dropped.Load() >= 10 })
	down.Store(false)
	waitFor(t, "the worker noticing the server is back", func() bool { return len(logs.find("the server answers again")) > 0 })
	b.start(t, "quick", "q", "")
	b.waitStatus(t, "q", workflow.StatusCompleted, 15*time.Second)

	if w := logs.find("polling for tasks failed"); len(w) != 1 || !strings.HasPrefix(w[0], "WARN ") || !strings.Contains(w[0], "EOF") {
		t.Errorf("want one warning for the outage, got %q", w)
	}
	if i := logs.find("the server answers again"); len(i) != 1 || !strings.HasPrefix(i[0], "INFO ") || !strings.Contains(i[0], "down_for=") {
		t.Errorf("want one line for the end of the outage, got %q", i)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quickBehind serves the definition quick (one echo step) from a server
// behind a front server, whose URL it returns: a request that intercept
// answers itself (it returns true) goes no further; the others are passed
// on, and served, when set, is called once each has been answered.
func quickBehind(t *testing.T, intercept func(w http.ResponseWriter, r *http.Request) bool, served func()) (*bundle, string) {
	t.Helper()
	b := setup(t)
	b.define(t, `
name: quick
steps:
  - {id: s, type: task, handler: echo, input: {ok: true}}
`)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // long polls cut short at the end of a test
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if intercept(w, r) {
			return
		}
		proxy.ServeHTTP(w, r)
		if served != nil {
			served()
		}
	}))
	t.Cleanup(front.Close)
	return b, front.URL
}

// closeUnanswered closes the request's connection without an answer, as a
// server that went away.
func closeUnanswered(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}
