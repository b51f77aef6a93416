package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type backend struct {
	name string
	// newDB returns the address of a fresh database; open opens a store on it.
	newDB func(t *testing.T) string
	open  func(t *testing.T, addr string) store.Backend
}

var backends = []backend{
	{"sqlite",
		func(t *testing.T) string { return "sqlite:" + t.TempDir() + "/flowd.db" },
		func(t *testing.T, addr string) store.Backend {
			st, err := sqlite.Open(context.Background(), addr, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	{"postgres",
		func(t *testing.T) string { return pgtest.NewDatabase(t) },
		func(t *testing.T, addr string) store.Backend {
			st, err := postgres.Open(context.Background(), addr, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
}

// postgresBackend is the PostgreSQL backend, which the tests of several
// nodes on one database need (SQLite has one writer).
func postgresBackend(t *testing.T) backend {
	t.Helper()
	b := backends[1]
	if b.name != "postgres" {
		t.Fatalf("backends[1] is %s", b.name)
	}
	return b
}

// forEachBackend runs fn as a parallel subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// node is one engine on a store.
type node struct {
	t   *testing.T
	st  store.Backend
	eng *engine.Engine
}

type nodeOpts struct {
	workers  int
	lease    time.Duration
	handlers map[string]engine.Handler
	noStart  bool
	// wrap, if set, wraps the store the engine uses (not the node's st).
	wrap func(store.Backend) store.Backend
	// maxState is Config.MaxStateBytes.
	maxState int
	// outbound is Config.OutboundAllow; nil opens loopback, where the
	// tests' listeners are (an empty list opens nothing).
	outbound []string
	// maxVersions is Config.MaxVersions.
	maxVersions int
	// maxDescendants is Config.MaxDescendants.
	maxDescendants int
	// noSweeps: the sweeper runs once at the start and then not for an
	// hour, so that a test sees what a write did by itself.
	noSweeps bool
	// metrics is Config.Metrics.
	metrics *metrics.Metrics
}

func newNode(t *testing.T, b backend, addr string, o nodeOpts) *node {
	t.Helper()
	st := b.open(t, addr)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	switch {
	case o.workers == 0:
		o.workers = 4
	case o.workers < 0:
		o.workers = 0 // no in-process workers
	}
	engineStore := st
	if o.wrap != nil {
		engineStore = o.wrap(st)
	}
	if o.outbound == nil {
		o.outbound = outbound.Loopback
	}
	sweep := 50 * time.Millisecond
	if o.noSweeps {
		sweep = time.Hour
	}
	eng, err := engine.New(engine.Config{Store: engineStore, Workers: &o.workers, Lease: o.lease,
		SweepInterval: sweep, PollInterval: 50 * time.Millisecond, MaxStateBytes: o.maxState,
		OutboundAllow: o.outbound, MaxVersions: o.maxVersions, MaxDescendants: o.maxDescendants,
		Metrics: o.metrics})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range o.handlers {
		eng.Register(name, h)
	}
	if !o.noStart {
		if err := eng.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(eng.Stop)
	}
	return &node{t: t, st: st, eng: eng}
}

func (n *node) define(yaml string) {
	n.t.Helper()
	if _, _, err := n.eng.PutDefinition(context.Background(), []byte(yaml)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) start(def, id, input string) *workflow.Instance {
	n.t.Helper()
	inst, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{ID: id, Definition: def, Input: json.RawMessage(input)})
	if err != nil {
		n.t.Fatal(err)
	}
	return inst
}

// waitStatus polls until the instance has the status, or fails after timeout.
func (n *node) waitStatus(id string, want workflow.Status, timeout time.Duration) *workflow.Instance {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		inst, err := n.st.Get(context.Background(), id)
		if err != nil {
			n.t.Fatal(err)
		}
		if inst.Status == want {
			return inst
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(inst, "", "  ")
			n.t.Fatalf("workflow %s is %s after %s, want %s:\n%s", id, inst.Status, timeout, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkHistory asserts versions 0..current with no gap.
func (n *node) checkHistory(inst *workflow.Instance) []store.HistoryEntry {
	n.t.Helper()
	h, err := n.st.History(context.Background(), inst.ID, 0, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	if int64(len(h)) != inst.Version+1 {
		n.t.Fatalf("history of %s has %d rows for version %d", inst.ID, len(h), inst.Version)
	}
	for i, e := range h {
		if e.Version != int64(i) {
			n.t.Fatalf("history of %s: row %d has version %d", inst.ID, i, e.Version)
		}
	}
	return h
}

func output(t *testing.T, inst *workflow.Instance, step string) string {
	t.Helper()
	st := inst.State.Steps[step]
	if st == nil {
		t.Fatalf("no step %s", step)
	}
	return string(st.Output)
}

func echo(_ context.Context, t engine.Task) (json.RawMessage, error) { return t.Input, nil }

const chainDef = `
name: chain
steps:
  - {id: a, type: task, handler: echo, input: {n: "{{ .input.n }}", id: "{{ .input.id }}"}}
  - {id: b, type: task, handler: echo, depends_on: [a], input: {prev: "{{ .steps.a.output.n }}", text: "n={{ .steps.a.output.n }}"}}
  - {id: c, type: task, handler: echo, depends_on: [b], input: "{{ .steps.b.output }}"}
`

func TestChainCompletes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		cc := &claimCounter{}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo},
			wrap: func(st store.Backend) store.Backend { cc.Backend = st; return cc }})
		n.define(chainDef)
		inst := n.start("chain", "", `{"n": 9007199254740993, "id": "x"}`)
		if inst.Status != workflow.StatusRunning || inst.Version != 0 || inst.DefinitionRevision != 1 {
			t.Fatalf("started: %+v", inst)
		}
		if st := inst.State.Steps; st["a"].Status != workflow.StepRunning || st["b"].Status != workflow.StepPending || st["c"].Status != workflow.StepPending {
			t.Fatalf("initial steps: a=%s b=%s c=%s", st["a"].Status, st["b"].Status, st["c"].Status)
		}
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		if got := output(t, done, "b"); got != `{"prev":9007199254740993,"text":"n=9007199254740993"}` {
			t.Errorf("b's rendered input/output = %s", got)
		}
		if got := output(t, done, "c"); got != `{"prev":9007199254740993,"text":"n=9007199254740993"}` {
			t.Errorf("c's typed single reference = %s", got)
		}
		for _, s := range []string{"a", "b", "c"} {
			if done.State.Steps[s].Attempts != 1 {
				t.Errorf("step %s attempts = %d", s, done.State.Steps[s].Attempts)
			}
		}
		// Only a is claimed on its own: b and c are leased to the worker in
		// the transaction that completes their predecessor. A claim writes
		// no version.
		n.checkHistory(done)
		if own := cc.own.Load(); own != 1 || done.Version != 3 {
			t.Errorf("%d tasks leased by claims and version %d for a 3-step chain, want 1 and 3 (start, 3 completions)", own, done.Version)
		}
	})
}

func TestRetriesThenFailsThenRetryAction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var calls atomic.Int64
		var succeed atomic.Bool
		flaky := func(_ context.Context, t engine.Task) (json.RawMessage, error) {
			calls.Add(1)
			if succeed.Load() {
				return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, t.Attempt)), nil
			}
			return nil, fmt.Errorf("boom on attempt %d", t.Attempt)
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"flaky": flaky, "echo": echo}})
		n.define(`
name: flaky
steps:
  - {id: a, type: task, handler: flaky, retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 20ms}}
  - {id: b, type: task, handler: echo, depends_on: [a], input: "{{ .steps.a.output }}"}
`)
		inst := n.start("flaky", "f-1", `{}`)
		failed := n.waitStatus(inst.ID, workflow.StatusFailed, 10*time.Second)
		a := failed.State.Steps["a"]
		if a.Status != workflow.StepFailed || a.Attempts != 3 || a.Error != "boom on attempt 3" || calls.Load() != 3 {
			t.Fatalf("after exhausting retries: step a %+v, %d calls", a, calls.Load())
		}
		if failed.State.Steps["b"].Status != workflow.StepPending {
			t.Errorf("b should never have run: %+v", failed.State.Steps["b"])
		}
		succeed.Store(true)
		if _, err := n.eng.Action(context.Background(), inst.ID, "retry"); err != nil {
			t.Fatal(err)
		}
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		if got := output(t, done, "b"); got != `{"attempt":4}` {
			t.Errorf("after retry, attempt numbering continues: b = %s", got)
		}
		n.checkHistory(done)
	})
}

func TestPermanentFailureAndMissingReference(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		perm := func(context.Context, engine.Task) (json.RawMessage, error) {
			return nil, engine.Permanent(errors.New("card declined"))
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"perm": perm, "echo": echo}})
		n.define(`
name: perm
steps:
  - {id: a, type: task, handler: perm, retry: {max_attempts: 5}}
`)
		inst := n.waitStatus(n.start("perm", "", "").ID, workflow.StatusFailed, 10*time.Second)
		if a := inst.State.Steps["a"]; a.Attempts != 1 || a.Error != "card declined" {
			t.Errorf("a permanent failure is not retried: %+v", a)
		}
		n.define(`
name: missing
steps:
  - {id: a, type: task, handler: echo, input: {sku: "{{ .input.sku }}"}}
`)
		inst = n.start("missing", "", `{"other": 1}`)
		if inst.Status != workflow.StatusFailed || inst.State.Steps["a"].Status != workflow.StepFailed ||
			!strings.Contains(inst.State.Steps["a"].Error, ".input.sku") {
			t.Errorf("a missing reference fails the step at once, naming it: %s %+v", inst.Status, inst.State.Steps["a"])
		}
	})
}

const approvalDef = `
name: approval
steps:
  - {id: prepare, type: task, handler: echo, input: {order: "{{ .input.order }}"}}
  - {id: approve, type: wait, depends_on: [prepare]}
  - {id: nap, type: sleep, duration: 50ms, depends_on: [approve]}
  - {id: ship, type: task, handler: echo, depends_on: [nap], input: {by: "{{ .steps.approve.output.by }}", order: "{{ .steps.prepare.output.order }}"}}
`

func TestWaitAndSleepSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"echo": echo}})
		n.define(approvalDef)
		inst := n.start("approval", "ap-1", `{"order": "o-1"}`)
		ctx := context.Background()
		// A PENDING step cannot be completed from outside.
		if _, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: inst.ID, Step: "ship"}); !errors.Is(err, engine.ErrStepNotReady) {
			t.Errorf("completing a PENDING step: %v, want ErrStepNotReady", err)
		}
		var waiting *workflow.Instance
		deadline := time.Now().Add(10 * time.Second)
		for waiting == nil || waiting.State.Steps["approve"].Status != workflow.StepWaiting {
			if time.Now().After(deadline) {
				t.Fatalf("approve never WAITING: %+v", waiting.State.Steps)
			}
			time.Sleep(20 * time.Millisecond)
			waiting, _ = n.st.Get(ctx, inst.ID)
		}
		stale := waiting.Version - 1
		if _, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: inst.ID, Step: "approve", ExpectedVersion: &stale}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("stale expected version: %v", err)
		}
		v := waiting.Version
		if _, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: inst.ID, Step: "approve", Output: json.RawMessage(`{"by":"alice"}`), ExpectedVersion: &v}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: inst.ID, Step: "approve"}); !errors.Is(err, workflow.ErrStepCompleted) {
			t.Errorf("completing twice: %v", err)
		}
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		if got := output(t, done, "ship"); got != `{"by":"alice","order":"o-1"}` {
			t.Errorf("ship = %s", got)
		}
		if got := output(t, done, "nap"); got != "null" {
			t.Errorf("a sleep step's output = %s", got)
		}
		n.checkHistory(done)
	})
}

func TestPauseResumeCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		release := make(chan struct{})
		var delivered sync.Map
		gate := func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
			delivered.Store(t.Step, t.Attempt)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.RawMessage(`"ok"`), nil
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"gate": gate}})
		n.define(`
name: gated
steps:
  - {id: a, type: task, handler: gate}
  - {id: b, type: task, handler: gate, depends_on: [a]}
`)
		ctx := context.Background()
		inst := n.start("gated", "p-1", "")
		waitDelivered(t, &delivered, "a")
		if _, err := n.eng.Action(ctx, inst.ID, "pause"); err != nil {
			t.Fatal(err)
		}
		if _, err := n.eng.Action(ctx, inst.ID, "pause"); !errors.Is(err, engine.ErrActionNotAllowed) || !strings.Contains(err.Error(), "it is PAUSED") {
			t.Errorf("pausing twice: %v", err)
		}
		close(release) // a's attempt, leased before the pause, completes and is recorded
		deadline := time.Now().Add(10 * time.Second)
		for {
			cur, _ := n.st.Get(ctx, inst.ID)
			if cur.State.Steps["a"].Status == workflow.StepCompleted {
				if cur.Status != workflow.StatusPaused || cur.State.Steps["b"].Status != workflow.StepPending {
					t.Fatalf("while paused nothing is scheduled: %s, b=%s", cur.Status, cur.State.Steps["b"].Status)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a's completion was not recorded while paused")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if _, ok := delivered.Load("b"); ok {
			t.Fatal("b was delivered while paused")
		}
		if _, err := n.eng.Action(ctx, inst.ID, "resume"); err != nil {
			t.Fatal(err)
		}
		n.checkHistory(n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second))

		// Cancel releases the tasks: a later completion with the old lease is fenced.
		block := make(chan struct{})
		var leased atomic.Value
		hold := func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
			leased.Store(t)
			<-block
			return json.RawMessage(`1`), nil
		}
		n2 := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"gate": hold}})
		n2.define(`{"name": "gated", "steps": [{"id": "a", "type": "task", "handler": "gate"}]}`)
		c := n2.start("gated", "c-1", "")
		for leased.Load() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := n2.eng.Action(ctx, c.ID, "cancel"); err != nil {
			t.Fatal(err)
		}
		task := leased.Load().(engine.Task)
		if err := n2.eng.CompleteTask(ctx, task.ID, task.Lease, json.RawMessage(`1`)); !errors.Is(err, engine.ErrLeaseLost) && !errors.Is(err, engine.ErrNotRunning) {
			t.Errorf("completing a cancelled workflow's task: %v, want a 409 error", err)
		}
		if _, err := n2.eng.Heartbeat(ctx, task.ID, task.Lease, 0); err == nil {
			t.Error("heartbeat on a cancelled workflow's task succeeded")
		}
		close(block)
		final, _ := n2.st.Get(ctx, c.ID)
		if final.Status != workflow.StatusCancelled || final.State.Steps["a"].Status == workflow.StepCompleted {
			t.Errorf("cancelled workflow changed: %s %+v", final.Status, final.State.Steps["a"])
		}
	})
}

func waitDelivered(t *testing.T, m *sync.Map, step string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := m.Load(step); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("step %s never delivered", step)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFencing: a worker whose lease expired cannot complete; the re-delivered
// attempt wins.
func TestFencing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// No in-process workers: the test plays two remote workers.
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(`{"name": "one", "steps": [{"id": "a", "type": "task", "handler": "remote", "retry": {"max_attempts": 3}}]}`)
		inst := n.start("one", "fence-1", "")
		ctx := context.Background()
		// A lease long enough that the second poll comes before it expires,
		// even under -race on a loaded machine (100 ms was not).
		first, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w1", Handlers: []string{"remote"}, Lease: time.Second})
		if err != nil || first == nil || first.Attempt != 1 {
			t.Fatalf("first poll: %+v, %v", first, err)
		}
		if none, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w2", Handlers: []string{"remote"}}); none != nil || err != nil {
			t.Fatalf("a leased task was delivered twice: %+v, %v", none, err)
		}
		var second *engine.Task
		deadline := time.Now().Add(10 * time.Second)
		for second == nil {
			if time.Now().After(deadline) {
				t.Fatal("the expired lease was never re-queued")
			}
			second, err = n.eng.Poll(ctx, engine.PollParams{Worker: "w2", Handlers: []string{"remote"}, Wait: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
		}
		if second.Attempt != 2 || second.ID != first.ID || second.Lease == first.Lease {
			t.Fatalf("re-delivery: %+v (first %+v)", second, first)
		}
		if err := n.eng.CompleteTask(ctx, first.ID, first.Lease, json.RawMessage(`"stale"`)); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("stale lease completing: %v, want ErrLeaseLost", err)
		}
		if err := n.eng.FailTask(ctx, first.ID, first.Lease, "x", true); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("stale lease failing: %v", err)
		}
		if _, err := n.eng.Heartbeat(ctx, first.ID, first.Lease, 0); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("stale lease heartbeat: %v", err)
		}
		until, err := n.eng.Heartbeat(ctx, second.ID, second.Lease, time.Minute)
		if err != nil || until.Before(time.Now().Add(50*time.Second)) {
			t.Errorf("heartbeat: %v, %v", until, err)
		}
		if err := n.eng.CompleteTask(ctx, second.ID, second.Lease, json.RawMessage(`"fresh"`)); err != nil {
			t.Fatal(err)
		}
		if err := n.eng.CompleteTask(ctx, second.ID, second.Lease, json.RawMessage(`"again"`)); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("completing twice: %v", err)
		}
		if err := n.eng.CompleteTask(ctx, "no-such-task", "x", nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown task: %v", err)
		}
		done := n.waitStatus(inst.ID, workflow.StatusCompleted, 5*time.Second)
		if a := done.State.Steps["a"]; string(a.Output) != `"fresh"` || a.Attempts != 2 {
			t.Errorf("step a = %+v", a)
		}
		n.checkHistory(done)
	})
}

func TestTimeouts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		slow := func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
			if t.Attempt < 2 {
				<-ctx.Done() // the step timeout ends this attempt
				return nil, ctx.Err()
			}
			return json.RawMessage(`"second try"`), nil
		}
		n := newNode(t, b, b.newDB(t), nodeOpts{handlers: map[string]engine.Handler{"slow": slow}, lease: 5 * time.Second})
		n.define(`{"name": "step-timeout", "steps": [{"id": "a", "type": "task", "handler": "slow", "timeout": "1s", "retry": {"max_attempts": 2, "initial_backoff": "10ms"}}]}`)
		inst := n.waitStatus(n.start("step-timeout", "", "").ID, workflow.StatusCompleted, 10*time.Second)
		if a := inst.State.Steps["a"]; a.Attempts != 2 || string(a.Output) != `"second try"` {
			t.Errorf("a timed-out attempt uses one attempt: %+v", a)
		}

		n.define(`{"name": "wf-timeout", "timeout": "200ms", "steps": [{"id": "w", "type": "wait"}]}`)
		wf := n.start("wf-timeout", "to-1", "")
		if wf.Deadline == nil {
			t.Fatal("no deadline")
		}
		n.waitStatus(wf.ID, workflow.StatusTimedOut, 10*time.Second)
		retried, err := n.eng.Action(context.Background(), wf.ID, "retry")
		if err != nil || retried.Status != workflow.StatusRunning || !retried.Deadline.After(*wf.Deadline) {
			t.Fatalf("retry after a timeout: %+v, %v", retried, err)
		}
		n.checkHistory(n.waitStatus(wf.ID, workflow.StatusTimedOut, 10*time.Second))
	})
}

func TestHTTPStep(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"got": %q, "key": %q, "event": %q}`, body["order"], r.Header.Get("Idempotency-Key"), r.Header.Get("X-Event"))
	}))
	defer srv.Close()
	b := backends[0]
	n := newNode(t, b, b.newDB(t), nodeOpts{})
	n.define(`
name: hook
steps:
  - id: call
    type: http
    request:
      method: POST
      url: "` + srv.URL + `/hook?o={{ .input.order }}"
      headers: {X-Event: "{{ .input.event }}"}
      body: {order: "{{ .input.order }}"}
    retry: {max_attempts: 3, initial_backoff: 10ms}
`)
	inst := n.waitStatus(n.start("hook", "h-1", `{"order": "o-9", "event": "shipped"}`).ID, workflow.StatusCompleted, 10*time.Second)
	if got := output(t, inst, "call"); got != `{"status":200,"body":{"got":"o-9","key":"h-1/call","event":"shipped"}}` {
		t.Errorf("http output = %s", got)
	}
	if a := inst.State.Steps["call"].Attempts; a != 2 {
		t.Errorf("503 then 200: %d attempts", a)
	}
}

func TestDefinitions(t *testing.T) {
	b := backends[0]
	addr := b.newDB(t)
	n := newNode(t, b, addr, nodeOpts{noStart: true})
	ctx := context.Background()
	info, created, err := n.eng.PutDefinition(ctx, []byte(chainDef))
	if err != nil || !created || info.Revision != 1 {
		t.Fatalf("first put: %+v %v %v", info, created, err)
	}
	if info, created, _ = n.eng.PutDefinition(ctx, []byte(chainDef)); created || info.Revision != 1 {
		t.Errorf("same definition again made a revision: %+v %v", info, created)
	}
	changed := strings.Replace(chainDef, "steps:", "timeout: 1m\nsteps:", 1)
	if info, created, _ = n.eng.PutDefinition(ctx, []byte(changed)); !created || info.Revision != 2 {
		t.Errorf("changed definition: %+v %v", info, created)
	}
	_, _, err = n.eng.PutDefinition(ctx, []byte("name: bad\nsteps:\n  - {id: a, type: task}\n  - {id: a, type: nope, depends_on: [zz]}\n"))
	var de *workflow.DefinitionError
	if !errors.As(err, &de) || len(de.Problems) < 3 {
		t.Errorf("invalid definition: %v", err)
	}
	if _, err := n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown definition: %v", err)
	}
	// An instance keeps the revision it started with.
	inst, err := n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "chain", Revision: 1})
	if err != nil || inst.DefinitionRevision != 1 || inst.Deadline != nil {
		t.Errorf("start at revision 1: %+v %v", inst, err)
	}
	inst, err = n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "chain"})
	if err != nil || inst.DefinitionRevision != 2 || inst.Deadline == nil {
		t.Errorf("start at the latest: %+v %v", inst, err)
	}
	// A revision stored by another node is the latest here at once, although
	// this node has compiled revision 2.
	other := newNode(t, b, addr, nodeOpts{noStart: true})
	if info, created, err := other.eng.PutDefinition(ctx, []byte(strings.Replace(changed, "1m", "2m", 1))); err != nil || !created || info.Revision != 3 {
		t.Fatalf("put on the other node: %+v %v %v", info, created, err)
	}
	inst, err = n.eng.StartWorkflow(ctx, engine.StartParams{Definition: "chain"})
	if err != nil || inst.DefinitionRevision != 3 || inst.Deadline == nil || inst.Deadline.Sub(inst.CreatedAt).Round(time.Second) != 2*time.Minute {
		t.Errorf("start at the latest after another node's put: %+v %v", inst, err)
	}
}
