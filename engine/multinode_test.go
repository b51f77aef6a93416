package engine_test

// Acceptance tests of the engine across nodes: several
// engines on one database, remote workers, retries, wait steps completed from
// outside with optimistic concurrency, and a node that dies holding leases.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/workflow"
)

// delivery is one attempt handed to a handler.
type delivery struct {
	wf, step string
	attempt  int
}

// deliveries records every attempt delivered to any handler of a test, and
// fails the test when one (workflow, step, attempt) is delivered twice.
type deliveries struct {
	t     *testing.T
	seen  sync.Map // delivery → who
	mu    sync.Mutex
	byWho map[string]int
	at    map[delivery]time.Time
}

func newDeliveries(t *testing.T) *deliveries {
	return &deliveries{t: t, byWho: map[string]int{}, at: map[delivery]time.Time{}}
}

func (d *deliveries) record(who string, task engine.Task) {
	k := delivery{task.WorkflowID, task.Step, task.Attempt}
	if prev, dup := d.seen.LoadOrStore(k, who); dup {
		d.t.Errorf("%s/%s attempt %d delivered twice: to %s, then to %s", k.wf, k.step, k.attempt, prev, who)
	}
	d.mu.Lock()
	d.byWho[who]++
	d.at[k] = time.Now()
	d.mu.Unlock()
}

func (d *deliveries) has(wf, step string, attempt int) bool {
	_, ok := d.seen.Load(delivery{wf, step, attempt})
	return ok
}

func (d *deliveries) deliveredAt(wf, step string, attempt int) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at[delivery{wf, step, attempt}]
}

func (d *deliveries) counts() (map[string]int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := 0
	for _, n := range d.byWho {
		total += n
	}
	return maps.Clone(d.byWho), total
}

// checkStepsSettleOnce: see testkit.CheckStepsSettleOnce.
var checkStepsSettleOnce = testkit.CheckStepsSettleOnce

// waitAllCompleted waits until every instance is COMPLETED and returns them.
// It polls the status counts (one query: the database holds only these
// instances) and fails at once when an instance leaves RUNNING for anything
// but COMPLETED, or after timeout.
func waitAllCompleted(t *testing.T, st store.Backend, ids []string, timeout time.Duration) map[string]*workflow.Instance {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		counts, err := store.CountByStatus(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		settled := counts[workflow.StatusCompleted] >= int64(len(ids))
		for status, n := range counts {
			if n > 0 && status != workflow.StatusRunning && status != workflow.StatusCompleted {
				settled = true // find it below
			}
		}
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	done := make(map[string]*workflow.Instance, len(ids))
	var stuck []*workflow.Instance
	for _, id := range ids {
		inst, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusCompleted {
			done[id] = inst
		} else {
			stuck = append(stuck, inst)
		}
	}
	if len(stuck) > 0 {
		b, _ := json.MarshalIndent(stuck[0], "", "  ")
		t.Fatalf("%d of %d workflows not COMPLETED (after at most %s); the first:\n%s", len(stuck), len(ids), timeout, b)
	}
	return done
}

// diamondDef: a → (b, c) → d. b fails its first attempt and is retried after
// a short backoff; c is completed from outside; d is served by remote workers
// only (no engine registers "remote") and renders b's and c's outputs.
const diamondDef = `
name: diamond
steps:
  - {id: a, type: task, handler: prep, input: {n: "{{ .input.n }}"}}
  - id: b
    type: task
    handler: flaky
    depends_on: [a]
    input: {n: "{{ .steps.a.output.n }}"}
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 40ms}
  - {id: c, type: wait, depends_on: [a]}
  - id: d
    type: task
    handler: remote
    depends_on: [b, c]
    retry: {max_attempts: 3, initial_backoff: 20ms, max_backoff: 40ms}
    input:
      n: "{{ .input.n }}"
      text: "b={{ .steps.b.output.val }};c={{ .steps.c.output.by }}"
      b: "{{ .steps.b.output }}"
      c: "{{ .steps.c.output }}"
`

// remoteFailEvery: the remote worker fails d's first attempt (FailTask,
// retryable) for every instance whose n is a multiple of it.
const remoteFailEvery = 5

type diamondInput struct {
	N int `json:"n"`
}

type dInput struct {
	N    int             `json:"n"`
	Text string          `json:"text"`
	B    json.RawMessage `json:"b"`
	C    json.RawMessage `json:"c"`
}

type dOutput struct {
	Worker  string `json:"worker"`
	Attempt int    `json:"attempt"`
	Text    string `json:"text"`
	B       struct {
		Val string `json:"val"`
	} `json:"b"`
	C struct {
		By string `json:"by"`
	} `json:"c"`
}

// diamondHandlers are the in-process handlers of one node.
// Attempt 1 of b sends the instance to ready (c is WAITING from then on).
func diamondHandlers(who string, rec *deliveries, ready chan<- string) map[string]engine.Handler {
	return map[string]engine.Handler{
		"prep": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			rec.record(who, task)
			return task.Input, nil
		},
		"flaky": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			rec.record(who, task)
			var in diamondInput
			if err := json.Unmarshal(task.Input, &in); err != nil {
				return nil, engine.Permanent(err)
			}
			if task.Attempt == 1 {
				select {
				case ready <- task.WorkflowID: // room for every instance
				default: // only a second delivery of attempt 1, reported by record
				}
				return nil, fmt.Errorf("b%d: transient failure on attempt 1", in.N)
			}
			return json.Marshal(map[string]string{"val": fmt.Sprintf("b%d@%d", in.N, task.Attempt)})
		},
	}
}

// remoteWorker serves "remote" through eng.Poll until ctx ends.
func remoteWorker(ctx context.Context, t *testing.T, eng *engine.Engine, name string, rec *deliveries) {
	bg := context.Background() // a completion in flight finishes even when ctx ends
	for ctx.Err() == nil {
		task, err := eng.Poll(ctx, engine.PollParams{Worker: name, Handlers: []string{"remote"},
			Lease: 20 * time.Second, Wait: 200 * time.Millisecond})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			t.Errorf("%s: poll: %v", name, err)
			return
		}
		if task == nil {
			continue
		}
		rec.record(name, *task)
		var in dInput
		if err := json.Unmarshal(task.Input, &in); err != nil {
			t.Errorf("%s: input of %s/%s: %v", name, task.WorkflowID, task.Step, err)
			continue
		}
		if task.Attempt == 1 && in.N%remoteFailEvery == 0 {
			if err := eng.FailTask(bg, task.ID, task.Lease, "remote hiccup", true); err != nil {
				t.Errorf("%s: FailTask %s: %v", name, task.WorkflowID, err)
			}
			continue
		}
		out, _ := json.Marshal(map[string]any{"worker": name, "attempt": task.Attempt, "text": in.Text, "b": in.B, "c": in.C})
		if err := eng.CompleteTask(bg, task.ID, task.Lease, out); err != nil {
			t.Errorf("%s: CompleteTask %s: %v", name, task.WorkflowID, err)
		}
	}
}

// approver completes every instance's wait step c from outside, reading the
// instance from one node's store and completing it through another node's
// engine, with ExpectedVersion; a conflict is retried from a fresh read. It
// learns from ready which instances have c WAITING (b's first delivery: c
// was made WAITING in the transaction that scheduled b), so that it does not
// poll every instance.
func approver(ctx context.Context, t *testing.T, nodes []*node, ready <-chan string, num map[string]int, conflicts *atomic.Int64) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-ready:
			for !approveOne(ctx, t, nodes, id, num[id], conflicts) {
				select { // c is not WAITING yet: cannot happen, but let it come
				case <-ctx.Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
}

// approveOne reports whether it is done with the instance.
func approveOne(ctx context.Context, t *testing.T, nodes []*node, id string, n int, conflicts *atomic.Int64) bool {
	reader, writer := nodes[(n+1)%len(nodes)], nodes[n%len(nodes)]
	output := json.RawMessage(fmt.Sprintf(`{"by":"approver-%d"}`, n))
	for ctx.Err() == nil {
		inst, err := reader.st.Get(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("approver: get %s: %v", id, err)
			}
			return true
		}
		switch c := inst.State.Steps["c"]; {
		case inst.Status != workflow.StatusRunning || c.Status == workflow.StepPending:
			return false // not yet (a terminal instance shows up in waitAllCompleted)
		case c.Status != workflow.StepWaiting:
			t.Errorf("approver: %s step c is %s", id, c.Status)
			return true
		}
		v := inst.Version
		_, err = writer.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: id, Step: "c", Output: output, ExpectedVersion: &v})
		if errors.Is(err, store.ErrConflict) {
			conflicts.Add(1)
			continue // moved on since the read: read again
		}
		if err != nil && ctx.Err() == nil {
			t.Errorf("approver: complete %s/c at version %d: %v", id, v, err)
		}
		return true
	}
	return true
}

// TestMultiNodeDiamond runs the diamond on two PostgreSQL nodes (separate
// pools on one database, in-process workers on both, a remote worker polling
// through each) and on one SQLite node.
func TestMultiNodeDiamond(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			if b.name == "postgres" {
				runDiamond(t, b, 2, 120)
			} else {
				runDiamond(t, b, 1, 40)
			}
		})
	}
}

func runDiamond(t *testing.T, b backend, nodeCount, instances int) {
	began := time.Now()
	rec := newDeliveries(t)
	ready := make(chan string, instances)
	addr := b.newDB(t)
	var nodes []*node
	for i := range nodeCount {
		who := fmt.Sprintf("node%d", i+1)
		nodes = append(nodes, newNode(t, b, addr, nodeOpts{handlers: diamondHandlers(who, rec, ready)}))
	}
	nodes[0].define(diamondDef) // the other node loads it from the store

	ids := make([]string, instances)
	num := map[string]int{}
	for n := range instances {
		ids[n] = fmt.Sprintf("dia-%03d", n)
		num[ids[n]] = n
	}

	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer func() { cancel(); bg.Wait() }() // before the nodes' cleanups close their stores
	var conflicts atomic.Int64
	for i, nd := range nodes {
		bg.Go(func() { remoteWorker(ctx, t, nd.eng, fmt.Sprintf("remote%d", i+1), rec) })
	}
	bg.Go(func() { approver(ctx, t, nodes, ready, num, &conflicts) })

	// Start the instances from every node at once, spread over the nodes.
	var starters sync.WaitGroup
	for i, nd := range nodes {
		starters.Go(func() {
			for n := i; n < instances; n += len(nodes) {
				in := fmt.Sprintf(`{"n": %d}`, n)
				if _, err := nd.eng.StartWorkflow(context.Background(), engine.StartParams{ID: ids[n], Definition: "diamond", Input: json.RawMessage(in)}); err != nil {
					t.Errorf("start %s on node%d: %v", ids[n], i+1, err)
				}
			}
		})
	}
	starters.Wait()
	if t.Failed() {
		t.FailNow()
	}

	done := waitAllCompleted(t, nodes[len(nodes)-1].st, ids, 60*time.Second)
	elapsed := time.Since(began)
	cancel()
	bg.Wait()

	wantDeliveries := 0
	for _, id := range ids {
		n, inst := num[id], done[id]
		steps := inst.State.Steps
		wantD := 1
		if n%remoteFailEvery == 0 {
			wantD = 2
		}
		wantDeliveries += 3 + wantD
		for _, k := range []delivery{{id, "a", 1}, {id, "b", 1}, {id, "b", 2}, {id, "d", wantD}} {
			if !rec.has(k.wf, k.step, k.attempt) {
				t.Errorf("%s/%s attempt %d was never delivered", k.wf, k.step, k.attempt)
			}
		}
		if steps["a"].Attempts != 1 || steps["b"].Attempts != 2 || steps["d"].Attempts != wantD {
			t.Errorf("%s attempts: a=%d b=%d (want 2) d=%d (want %d)", id, steps["a"].Attempts, steps["b"].Attempts, steps["d"].Attempts, wantD)
		}
		wantB := fmt.Sprintf("b%d@2", n)
		if got := string(steps["b"].Output); got != fmt.Sprintf(`{"val":%q}`, wantB) {
			t.Errorf("%s b output = %s", id, got)
		}
		if got := string(steps["c"].Output); got != fmt.Sprintf(`{"by":"approver-%d"}`, n) {
			t.Errorf("%s c output = %s", id, got)
		}
		var d dOutput
		if err := json.Unmarshal(steps["d"].Output, &d); err != nil {
			t.Errorf("%s d output %s: %v", id, steps["d"].Output, err)
		}
		wantText := fmt.Sprintf("b=%s;c=approver-%d", wantB, n)
		if d.Text != wantText || d.B.Val != wantB || d.C.By != fmt.Sprintf("approver-%d", n) ||
			d.Attempt != wantD || !strings.HasPrefix(d.Worker, "remote") {
			t.Errorf("%s d output = %s, want text %q rendered from b and c, attempt %d", id, steps["d"].Output, wantText, wantD)
		}
		h := nodes[n%len(nodes)].checkHistory(inst)
		checkStepsSettleOnce(t, id, h)
	}
	byWho, total := rec.counts()
	if total != wantDeliveries {
		t.Errorf("%d deliveries, want exactly %d (one per attempt)", total, wantDeliveries)
	}
	for i := range nodeCount {
		if who := fmt.Sprintf("node%d", i+1); byWho[who] == 0 {
			t.Errorf("%s ran no task: %v", who, byWho)
		}
	}
	t.Logf("%d instances on %d node(s) COMPLETED in %s; deliveries %v; %d version conflicts retried by the approver",
		instances, nodeCount, elapsed.Round(time.Millisecond), byWho, conflicts.Load())
}

// The crash test runs node A as a separate OS process: this test binary,
// started with crashNodeEnv set, runs TestCrashNodeProcess as a node whose
// handler blocks, until it is killed.
const (
	crashNodeEnv   = "FLOWD_CRASH_NODE"    // database URL
	crashNodeIDEnv = "FLOWD_CRASH_NODE_ID" // lease owner name
	// crashLease is long enough that node A's heartbeats renew its leases
	// on a loaded machine (at 1 s, a run under the race detector next to a
	// fuzzer on both cores once saw a lease end before the kill).
	crashLease     = 3 * time.Second
	crashInstances = 8
)

const crashDef = `
name: crash
steps:
  - {id: work, type: task, handler: work, retry: {max_attempts: 3, initial_backoff: 10ms}}
  - {id: finish, type: task, handler: echo, depends_on: [work], input: "{{ .steps.work.output }}"}
`

// TestCrashNodeProcess is node A of TestCrashLeasesExpire when run as its
// child process; otherwise it skips.
func TestCrashNodeProcess(t *testing.T) {
	addr := os.Getenv(crashNodeEnv)
	if addr == "" {
		t.Skip("the node process of TestCrashLeasesExpire")
	}
	// The parent holds our stdin: should it die without killing us, EOF ends
	// us. The timeout is a last resort.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) })

	st, err := postgres.Open(context.Background(), addr, postgres.Options{})
	if err != nil {
		fmt.Println("crash node: open:", err)
		os.Exit(2)
	}
	workers := crashInstances
	eng, err := engine.New(engine.Config{Store: st, Workers: &workers, Lease: crashLease,
		NodeID: os.Getenv(crashNodeIDEnv), SweepInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		fmt.Println("crash node:", err)
		os.Exit(2)
	}
	eng.Register("work", func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
		fmt.Printf("crash node: holding %s/%s attempt %d\n", task.WorkflowID, task.Step, task.Attempt)
		<-ctx.Done() // until killed: no completion, no failure, no release
		return nil, ctx.Err()
	})
	if err := eng.Start(context.Background()); err != nil {
		fmt.Println("crash node: start:", err)
		os.Exit(2)
	}
	select {} // SIGKILL ends this
}

// syncBuffer collects output written from several goroutines.
type syncBuffer = testkit.SyncBuffer

// TestCrashLeasesExpire: node A (another process) leases every instance's
// work step and is SIGKILLed while its handlers run, so it neither completes
// nor releases anything. Node B takes the tasks over once the leases expire
// and delivers attempt 2; every instance completes exactly once.
func TestCrashLeasesExpire(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	ctx := context.Background()
	rec := newDeliveries(t)
	work := func(_ context.Context, task engine.Task) (json.RawMessage, error) {
		rec.record("B", task)
		return json.Marshal(map[string]any{"node": "B", "attempt": task.Attempt})
	}
	echoB := func(_ context.Context, task engine.Task) (json.RawMessage, error) {
		rec.record("B", task)
		return task.Input, nil
	}
	// Node B exists but does not run yet, so that node A claims everything.
	nb := newNode(t, b, addr, nodeOpts{lease: crashLease, noStart: true,
		handlers: map[string]engine.Handler{"work": work, "echo": echoB}})
	nb.define(crashDef)
	ids := make([]string, crashInstances)
	for i := range ids {
		ids[i] = nb.start("crash", fmt.Sprintf("crash-%02d", i), "").ID
	}

	nodeA := "node-a-" + store.NewID()[24:]
	var out syncBuffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashNodeProcess$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), crashNodeEnv+"="+addr, crashNodeIDEnv+"="+nodeA)
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reports the SIGKILL; the output is logged on failure
		close(exited)
	}()
	kill := func() {
		_ = cmd.Process.Kill() // SIGKILL: no deferred function, no Stop, no release
		<-exited
		stdin.Close()
	}
	t.Cleanup(kill)

	// leasedByA returns the work tasks node A holds, by instance.
	leasedByA := func() map[string]*store.Task {
		held := map[string]*store.Task{}
		for _, id := range ids {
			tasks, err := nb.st.TasksOfInstance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range tasks {
				if task.StepID == "work" && task.Status == store.TaskLeased && task.LeaseOwner == nodeA && task.Attempt == 1 {
					held[id] = task
				}
			}
		}
		return held
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(leasedByA()) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("node A did not lease every task within 30s; its output:\n%s", out.String())
		}
		select {
		case <-exited:
			t.Fatalf("node A exited: %s\n%s", cmd.ProcessState, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Let node A heartbeat at least once, so its leases are renewed ones.
	time.Sleep(crashLease / 2)
	kill()
	killedAt := time.Now()
	t.Logf("node A (%s) leased %d tasks %s after its start, then was killed: %s", nodeA, len(ids),
		killedAt.Sub(began).Round(time.Millisecond), cmd.ProcessState)

	// A SIGKILLed node releases nothing: its leases are still there.
	held := leasedByA()
	if len(held) != len(ids) {
		t.Fatalf("after the kill only %d of %d tasks are still leased by node A", len(held), len(ids))
	}
	var lastLease time.Time
	for _, task := range held {
		if task.LeaseUntil.After(lastLease) {
			lastLease = task.LeaseUntil
		}
	}
	for _, id := range ids {
		// A reader is shown the attempt node A runs.
		inst, err := nb.st.GetWithAttemptsInFlight(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if w := inst.State.Steps["work"]; w.Status != workflow.StepRunning || w.Attempts != 1 {
			t.Fatalf("%s step work after the kill: %+v", id, w)
		}
	}

	if err := nb.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nb.eng.Stop)
	done := waitAllCompleted(t, nb.st, ids, 30*time.Second)
	t.Logf("node B completed all %d instances %s after the kill (leases ran until %s after it)",
		len(ids), time.Since(killedAt).Round(time.Millisecond), lastLease.Sub(killedAt).Round(time.Millisecond))

	_, total := rec.counts()
	if total != 2*len(ids) {
		t.Errorf("node B ran %d attempts, want %d (work at attempt 2 and finish, once each)", total, 2*len(ids))
	}
	for _, id := range ids {
		inst := done[id]
		w, f := inst.State.Steps["work"], inst.State.Steps["finish"]
		if !rec.has(id, "work", 2) || rec.has(id, "work", 1) || rec.has(id, "work", 3) || !rec.has(id, "finish", 1) {
			t.Errorf("%s: node B should run work at attempt 2 only, and finish once", id)
		}
		if at := rec.deliveredAt(id, "work", 2); !at.After(held[id].LeaseUntil) {
			t.Errorf("%s: attempt 2 delivered at %s, before node A's lease ended at %s", id, at, held[id].LeaseUntil)
		}
		var wOut, fOut struct {
			Node    string `json:"node"`
			Attempt int    `json:"attempt"`
		}
		errW, errF := json.Unmarshal(w.Output, &wOut), json.Unmarshal(f.Output, &fOut)
		if errW != nil || errF != nil || w.Attempts != 2 || wOut.Node != "B" || wOut.Attempt != 2 || f.Attempts != 1 || fOut != wOut {
			t.Errorf("%s: work attempts %d output %s, finish attempts %d output %s", id, w.Attempts, w.Output, f.Attempts, f.Output)
		}
		h := nb.checkHistory(inst)
		checkStepsSettleOnce(t, id, h)
		expired := 0
		for _, e := range h {
			if e.Cause == `step "work": lease expired (attempt 1)` {
				expired++
				if got := e.State.Steps["work"]; got.Error != "lease expired (attempt 1)" || got.Status != workflow.StepRunning {
					t.Errorf("%s v%d: work after the expiry: %+v", id, e.Version, got)
				}
			}
		}
		if expired != 1 {
			t.Errorf("%s: %d \"lease expired\" history rows, want 1", id, expired)
		}
		tasks, err := nb.st.TasksOfInstance(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if task.Status != store.TaskDone || task.Lease != "" || task.LeaseOwner != "" {
				t.Errorf("%s: task %s is %s (lease %q of %q)", id, task.StepID, task.Status, task.Lease, task.LeaseOwner)
			}
		}
	}
	if t.Failed() {
		t.Logf("node A's output:\n%s", out.String())
	}
}
