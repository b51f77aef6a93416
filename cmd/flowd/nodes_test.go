package main

// The acceptance test of the engine across nodes at
// the process boundary: two real `flowd serve` nodes on one PostgreSQL
// database, remote workers over the tasks API, a step retried after a
// failure, and a wait step completed from outside with If-Match.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// nodesDiamondDef: a → (b, c) → d. a runs in process on either node (echo,
// a demo handler); b and d are served only by the remote workers (no node
// registers flaky or finish); c is completed from outside.
const nodesDiamondDef = `
name: nodes-diamond
steps:
  - {id: a, type: task, handler: echo, input: {n: "{{ .input.n }}"}}
  - id: b
    type: task
    handler: flaky
    depends_on: [a]
    input: {n: "{{ .steps.a.output.n }}"}
    retry: {max_attempts: 3, initial_backoff: 50ms}
  - {id: c, type: wait, depends_on: [a]}
  - id: d
    type: task
    handler: finish
    depends_on: [b, c]
    input:
      text: "b={{ .steps.b.output.attempt }};c={{ .steps.c.output.by }}"
      b: "{{ .steps.b.output }}"
      c: "{{ .steps.c.output }}"
`

const (
	nodesInstances = 120
	nodesTimeout   = 90 * time.Second // for every instance to complete
	// Requests are latency-bound, not CPU-bound, on a loaded machine: a few
	// clients each for starting instances and for completing c keep the test
	// short.
	nodesStarters  = 3 // per node
	nodesApprovers = 4
)

// nodeDelivery is one attempt handed to a remote worker's handler.
type nodeDelivery struct {
	wf, step string
	attempt  int
}

// nodeDeliveries records the attempts delivered to the remote workers and
// fails the test when one (workflow, step, attempt) is delivered twice.
type nodeDeliveries struct {
	t     *testing.T
	seen  sync.Map // nodeDelivery → worker name
	mu    sync.Mutex
	byWho map[string]int
}

// record reports whether this is the first delivery of the attempt.
func (d *nodeDeliveries) record(who string, task worker.Task) bool {
	k := nodeDelivery{task.WorkflowID, task.Step, task.Attempt}
	d.mu.Lock()
	d.byWho[who]++
	d.mu.Unlock()
	if prev, dup := d.seen.LoadOrStore(k, who); dup {
		d.t.Errorf("%s/%s attempt %d delivered twice: to %s, then to %s", k.wf, k.step, k.attempt, prev, who)
		return false
	}
	return true
}

func (d *nodeDeliveries) has(wf, step string, attempt int) bool {
	_, ok := d.seen.Load(nodeDelivery{wf, step, attempt})
	return ok
}

// remoteHandlers are the handlers of one remote worker. flaky fails the first
// attempt of each (workflow, step) and then echoes its input, with the
// attempt that produced the output; its first delivery tells the approver
// that c is WAITING (c became WAITING in the transaction that scheduled b).
// finish echoes its input.
func remoteHandlers(who string, rec *nodeDeliveries, ready chan<- string) map[string]worker.Handler {
	return map[string]worker.Handler{
		"flaky": func(_ context.Context, task worker.Task) (json.RawMessage, error) {
			if rec.record(who, task) && task.Attempt == 1 {
				ready <- task.WorkflowID // room for every instance
			}
			if task.Attempt == 1 {
				return nil, fmt.Errorf("flaky: %s/%s fails its first attempt", task.WorkflowID, task.Step)
			}
			return json.Marshal(map[string]any{"attempt": task.Attempt, "input": task.Input})
		},
		"finish": func(_ context.Context, task worker.Task) (json.RawMessage, error) {
			rec.record(who, task)
			return task.Input, nil
		},
	}
}

// approveOutput is what the approver completes instance n's step c with.
func approveOutput(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"by":"approver-%d"}`, n))
}

// approveStep completes step c of instance id once it is WAITING, through the
// API with If-Match: GET the instance (its ETag is its version), POST
// …/steps/c/complete with that ETag; a 412 means the instance moved on since
// the GET (b's retry, say), so GET again. Reads and writes alternate between
// the nodes. It returns the number of 412s.
func approveStep(ctx context.Context, t *testing.T, clients []*client.Client, id string, n int) (conflicts int) {
	for try := 0; ctx.Err() == nil; try++ {
		reader, writer := clients[(n+try)%len(clients)], clients[(n+try+1)%len(clients)]
		inst, err := reader.GetWorkflow(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("approver: GET %s: %v", id, err)
			}
			return conflicts
		}
		switch c := inst.State.Steps["c"]; {
		case inst.Status != workflow.StatusRunning:
			t.Errorf("approver: %s is %s before c was completed", id, inst.Status)
			return conflicts
		case c == nil:
			t.Errorf("approver: %s has no step c: %+v", id, inst.State.Steps)
			return conflicts
		case c.Status == workflow.StepPending:
			// Cannot happen (the first delivery of b comes after c became
			// WAITING), but should it, wait for a.
			time.Sleep(20 * time.Millisecond)
			continue
		case c.Status != workflow.StepWaiting:
			t.Errorf("approver: %s step c is %s, want WAITING", id, c.Status)
			return conflicts
		}
		_, err = writer.CompleteStep(ctx, id, "c", api.ETag(inst.Version), approveOutput(n))
		switch {
		case err == nil:
			return conflicts
		case client.IsPreconditionFailed(err):
			conflicts++
		case ctx.Err() == nil:
			t.Errorf("approver: complete %s/c with If-Match %s: %v", id, api.ETag(inst.Version), err)
			return conflicts
		}
	}
	return conflicts
}

var metricLine = regexp.MustCompile(`(?m)^(flowd_tasks_claimed_total|flowd_workflows\{status="([A-Z_]+)"\}) (\S+)$`)

// nodeMetrics scrapes a node's /metrics: tasks claimed by the node, and the
// instances by status (of the whole database).
func nodeMetrics(t *testing.T, url string) (claimed float64, byStatus map[string]float64) {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s/metrics: %d %s", url, res.StatusCode, body)
	}
	claimed = -1
	byStatus = map[string]float64{}
	for _, m := range metricLine.FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[3]), 64)
		if err != nil {
			t.Fatalf("%s/metrics: %s: %v", url, m[0], err)
		}
		if m[2] == nil {
			claimed = v
		} else {
			byStatus[string(m[2])] = v
		}
	}
	if claimed < 0 {
		t.Fatalf("%s/metrics has no flowd_tasks_claimed_total:\n%.2000s", url, body)
	}
	return claimed, byStatus
}

// TestTwoServeNodes: two `flowd serve` processes (in-process run, as
// startServe does) on one PostgreSQL database run 120 diamond instances with
// a remote worker polling each node. Every instance completes; no attempt is
// delivered twice; b's failed first attempt is retried once; d renders b's
// and c's outputs; every history is contiguous; both nodes claimed tasks.
func TestTwoServeNodes(t *testing.T) {
	began := time.Now()
	db := pgtest.NewDatabase(t)
	flags := []string{"--db", db, "--demo-handlers", "--lease", "2s", "--sweep-interval", "200ms", "--log-level", "warn"}
	var urls []string
	var clients []*client.Client
	var stops []func() int
	for range 2 {
		url, stop := startServe(t, flags...)
		urls = append(urls, url)
		stops = append(stops, stop)
		clients = append(clients, client.New(url, client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second})))
	}
	ctx := context.Background()
	if _, _, err := clients[0].PutDefinition(ctx, "nodes-diamond", []byte(nodesDiamondDef)); err != nil {
		t.Fatalf("PUT the definition on node 1: %v", err)
	}
	started := time.Now()

	// Remote workers, one against each node. Stopped (deferred) before the
	// nodes, whose stops are cleanups.
	rec := &nodeDeliveries{t: t, byWho: map[string]int{}}
	ready := make(chan string, nodesInstances)
	var workerLog syncBuffer
	logger := slog.New(slog.NewTextHandler(&workerLog, &slog.HandlerOptions{Level: slog.LevelWarn}))
	wctx, stopWorkers := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		stopWorkers()
		bg.Wait()
		if t.Failed() && workerLog.String() != "" {
			t.Logf("the remote workers' warnings:\n%s", workerLog.String())
		}
	}()
	for i, c := range clients {
		name := fmt.Sprintf("worker%d", i+1)
		bg.Go(func() {
			err := worker.Run(wctx, worker.Config{
				Client: c, Name: name, Handlers: remoteHandlers(name, rec, ready),
				Concurrency: 4, Wait: time.Second, ShutdownGrace: 5 * time.Second, Logger: logger.With("worker", name),
			})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}

	// The approvers complete every c as soon as b's first delivery says it
	// is WAITING.
	ids := make([]string, nodesInstances)
	num := map[string]int{}
	for n := range ids {
		ids[n] = fmt.Sprintf("nodes-%03d", n)
		num[ids[n]] = n
	}
	var conflicts, approvals atomic.Int64
	var approvers sync.WaitGroup
	for range nodesApprovers {
		approvers.Go(func() {
			for approvals.Add(1) <= nodesInstances {
				select {
				case <-wctx.Done():
					return
				case id := <-ready:
					conflicts.Add(int64(approveStep(wctx, t, clients, id, num[id])))
				}
			}
		})
	}
	approved := make(chan struct{})
	bg.Go(func() { approvers.Wait(); close(approved) })

	// Start the instances through both nodes' APIs at once: instance n
	// through node n%2, by one of the starters of that node.
	var starters sync.WaitGroup
	for s := range nodesStarters * len(clients) {
		i, c := s%len(clients), clients[s%len(clients)]
		starters.Go(func() {
			for n := s; n < nodesInstances; n += nodesStarters * len(clients) {
				inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{
					ID: ids[n], Definition: "nodes-diamond", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
				})
				if err != nil {
					t.Errorf("create %s on node %d: %v", ids[n], i+1, err)
				} else if inst.Status != workflow.StatusRunning && inst.Status != workflow.StatusCompleted {
					t.Errorf("create %s on node %d: status %s", ids[n], i+1, inst.Status)
				}
			}
		})
	}
	starters.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Wait for the instances to settle: the status gauge of node 2 counts
	// the whole database, which holds only these instances.
	deadline := time.Now().Add(nodesTimeout)
	for {
		_, counts := nodeMetrics(t, urls[1])
		finished := counts[string(workflow.StatusCompleted)] >= nodesInstances
		for status, n := range counts {
			if n > 0 && status != string(workflow.StatusRunning) && status != string(workflow.StatusCompleted) {
				finished = true // an instance failed or stalled: reported below
			}
		}
		if finished || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	settled := time.Now()
	elapsed := settled.Sub(started)
	select {
	case <-approved:
	case <-time.After(5 * time.Second):
		t.Error("the approver did not see every instance's first delivery of b")
	}

	// Check every instance, through the node that did not create it.
	done := map[string]*workflow.Instance{}
	for n, id := range ids {
		inst, err := clients[(n+1)%2].GetWorkflow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != workflow.StatusCompleted {
			if n-len(done) < 3 { // the first few in full
				b, _ := json.MarshalIndent(inst, "", "  ")
				t.Errorf("%s is %s, not COMPLETED, after %s:\n%s", id, inst.Status, elapsed.Round(time.Millisecond), b)
			}
			continue
		}
		done[id] = inst
	}
	if len(done) < nodesInstances {
		t.Fatalf("%d of %d instances COMPLETED within %s", len(done), nodesInstances, nodesTimeout)
	}
	checkWorkersListed(t, clients)
	stopWorkers()
	bg.Wait()

	type bOutput struct {
		Attempt int `json:"attempt"`
		Input   struct {
			N int `json:"n"`
		} `json:"input"`
	}
	type dOutput struct {
		Text string          `json:"text"`
		B    json.RawMessage `json:"b"`
		C    json.RawMessage `json:"c"`
	}
	for n, id := range ids {
		inst := done[id]
		steps := inst.State.Steps
		a, b, c, d := steps["a"], steps["b"], steps["c"], steps["d"]
		if a == nil || b == nil || c == nil || d == nil {
			t.Errorf("%s lacks a step: %+v", id, steps)
			continue
		}
		for name, st := range steps {
			if st.Status != workflow.StepCompleted {
				t.Errorf("%s step %s is %s in a COMPLETED instance", id, name, st.Status)
			}
		}
		if a.Attempts != 1 || b.Attempts != 2 || d.Attempts != 1 {
			t.Errorf("%s attempts: a=%d b=%d d=%d, want 1, 2, 1", id, a.Attempts, b.Attempts, d.Attempts)
		}
		var bo bOutput
		if err := json.Unmarshal(b.Output, &bo); err != nil || bo.Attempt != 2 || bo.Input.N != n {
			t.Errorf("%s b output %s (%v), want attempt 2's echo of n=%d", id, b.Output, err, n)
		}
		if !jsonEqual(c.Output, approveOutput(n)) {
			t.Errorf("%s c output %s, want %s", id, c.Output, approveOutput(n))
		}
		var do dOutput
		if err := json.Unmarshal(d.Output, &do); err != nil {
			t.Errorf("%s d output %s: %v", id, d.Output, err)
		}
		if wantText := fmt.Sprintf("b=2;c=approver-%d", n); do.Text != wantText || !jsonEqual(do.B, b.Output) || !jsonEqual(do.C, c.Output) {
			t.Errorf("%s d output %s, want b's output %s, c's output %s and text %q", id, d.Output, b.Output, c.Output, wantText)
		}
		for _, k := range []nodeDelivery{{id, "b", 1}, {id, "b", 2}, {id, "d", 1}} {
			if !rec.has(k.wf, k.step, k.attempt) {
				t.Errorf("%s/%s attempt %d was never delivered to a remote worker", k.wf, k.step, k.attempt)
			}
		}

		h, err := clients[n%2].History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		checkNodesHistory(t, inst, h)
		// The server recorded b's completion by attempt 2, with the
		// output the instance holds.
		for _, e := range h {
			if st := e.State.Steps["b"]; st != nil && st.Status == workflow.StepCompleted {
				if want := `step "b" completed (attempt 2)`; e.Cause != want || !bytes.Equal(st.Output, b.Output) {
					t.Errorf("%s v%d: b completed with cause %q and output %s, want %q and %s", id, e.Version, e.Cause, st.Output, want, b.Output)
				}
				break
			}
		}
	}

	// Exactly the 3 deliveries of each instance reached the remote workers:
	// b twice, d once (a duplicate is reported by record as it happens).
	rec.mu.Lock()
	byWho := map[string]int{}
	total := 0
	for who, k := range rec.byWho {
		byWho[who] = k
		total += k
	}
	rec.mu.Unlock()
	if total != 3*nodesInstances {
		t.Errorf("%d deliveries to the remote workers, want %d (b twice, d once per instance): %v", total, 3*nodesInstances, byWho)
	}

	// Both nodes did work: each claimed tasks (in process, for a, and for
	// the remote worker polling it).
	var claimed []float64
	for i, url := range urls {
		k, _ := nodeMetrics(t, url)
		claimed = append(claimed, k)
		if k <= 0 {
			t.Errorf("node %d: flowd_tasks_claimed_total is %v: it did no work", i+1, k)
		}
	}
	checked := time.Now()

	// Both nodes shut down cleanly on the signal.
	for i, stop := range stops {
		if code := stop(); code != 0 {
			t.Errorf("node %d exited %d after the shutdown signal", i+1, code)
		}
	}
	t.Logf("%d instances COMPLETED on 2 nodes in %s (setup %s, checks %s, shutdown %s, %s in all); tasks claimed by node: %v; remote deliveries by worker: %v; %d If-Match conflicts (412) retried by the approvers",
		nodesInstances, elapsed.Round(time.Millisecond), started.Sub(began).Round(time.Millisecond), checked.Sub(settled).Round(time.Millisecond), time.Since(checked).Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond), claimed, byWho, conflicts.Load())
}

// checkNodesHistory asserts that the history holds every version from 0 to
// the instance's, in order, ending in the instance as it is, and that a
// completed step never changes again (its effect was applied once).
func checkNodesHistory(t *testing.T, inst *workflow.Instance, h []store.HistoryEntry) {
	t.Helper()
	if int64(len(h)) != inst.Version+1 {
		t.Errorf("%s: %d history entries for version %d", inst.ID, len(h), inst.Version)
	}
	for i, e := range h {
		if e.Version != int64(i) {
			t.Errorf("%s: history entry %d is version %d: not contiguous from 0", inst.ID, i, e.Version)
			return
		}
	}
	if len(h) == 0 {
		return
	}
	if last := h[len(h)-1]; last.Version != inst.Version || last.Status != workflow.StatusCompleted {
		t.Errorf("%s: the last history entry is version %d %s, the instance version %d %s", inst.ID, last.Version, last.Status, inst.Version, inst.Status)
	}
	for i := 1; i < len(h); i++ {
		for name, prev := range h[i-1].State.Steps {
			cur := h[i].State.Steps[name]
			if cur == nil {
				t.Errorf("%s v%d: step %s vanished", inst.ID, h[i].Version, name)
				continue
			}
			if prev.Status == workflow.StepCompleted && (cur.Status != workflow.StepCompleted || !bytes.Equal(cur.Output, prev.Output)) {
				t.Errorf("%s v%d (%s): completed step %s changed: %s %s → %s %s",
					inst.ID, h[i].Version, h[i].Cause, name, prev.Status, prev.Output, cur.Status, cur.Output)
			}
		}
	}
}

// checkWorkersListed: every node lists both remote workers, each with the
// node that served it, and both nodes' in-process pools (worker = node).
func checkWorkersListed(t *testing.T, clients []*client.Client) {
	t.Helper()
	for i, c := range clients {
		ws, err := c.ListWorkers(context.Background())
		if err != nil {
			t.Fatalf("node %d: list workers: %v", i+1, err)
		}
		nodeOf, pools := map[string]string{}, map[string]bool{}
		for _, w := range ws {
			nodeOf[w.Worker] = w.Node
			if w.Worker == w.Node {
				pools[w.Node] = true
			}
		}
		n1, n2 := nodeOf["worker1"], nodeOf["worker2"]
		if n1 == "" || n2 == "" || n1 == n2 || !pools[n1] || !pools[n2] {
			t.Errorf("node %d lists %+v; want worker1 and worker2 on two different nodes, and both nodes' pools", i+1, ws)
		}
	}
}
