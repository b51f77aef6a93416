package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// inFlight records, per key, the handler runs of tasks under that key: a
// run starts after its task's claim committed and ends before its
// completion is sent, so it lies inside the time the task is LEASED, and
// the runs in flight at once are at most the leased tasks of the key.
// Each start and end takes the next number of one sequence, so overlap is
// computed on a total order of events, not on clock readings.
type inFlight struct {
	mu   sync.Mutex
	seq  int
	now  map[string]int
	peak map[string]int
	runs map[string][][2]int // key → [start, end] of every run
}

func newInFlight() *inFlight {
	return &inFlight{now: map[string]int{}, peak: map[string]int{}, runs: map[string][][2]int{}}
}

// run records a run of key around fn.
func (f *inFlight) run(key string, fn func()) {
	f.mu.Lock()
	f.seq++
	start := f.seq
	f.now[key]++
	f.peak[key] = max(f.peak[key], f.now[key])
	f.mu.Unlock()
	fn()
	f.mu.Lock()
	f.seq++
	f.now[key]--
	f.runs[key] = append(f.runs[key], [2]int{start, f.seq})
	f.mu.Unlock()
}

// maxOverlap is the most runs of key that overlap, recomputed from the
// recorded intervals (a sweep over their starts and ends).
func (f *inFlight) maxOverlap(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	type event struct{ at, delta int }
	var evs []event
	for _, r := range f.runs[key] {
		evs = append(evs, event{r[0], 1}, event{r[1], -1})
	}
	slices.SortFunc(evs, func(a, b event) int { return a.at - b.at })
	n, peak := 0, 0
	for _, e := range evs {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

// keyedHandler runs a task of the tenant in its input for a moment.
func keyedHandler(f *inFlight) engine.Handler {
	return func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
		var in struct{ Tenant string }
		if err := json.Unmarshal(t.Input, &in); err != nil {
			return nil, err
		}
		f.run(in.Tenant, func() { time.Sleep(3 * time.Millisecond) })
		return json.RawMessage(`{}`), nil
	}
}

// Two definitions share a concurrency key per tenant, one of them through
// foreach iterations: however many workers there are, no tenant ever has
// more than 2 of its tasks running.
func TestStepConcurrencyKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newInFlight()
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 8, handlers: map[string]engine.Handler{"work": keyedHandler(f)}})
		n.define(`name: one
steps:
  - {id: a, type: task, handler: work, input: {tenant: "{{ .input.tenant }}"}, concurrency: {key: "{{ .input.tenant }}", limit: 2}}
  - {id: b, type: task, handler: work, depends_on: [a], input: {tenant: "{{ .input.tenant }}"}, concurrency: {key: "{{ .input.tenant }}", limit: 2}}
`)
		n.define(`name: many
steps:
  - id: each
    type: task
    handler: work
    foreach: .input.tenants
    input: {tenant: "{{ .item }}"}
    concurrency: {key: "{{ .item }}", limit: 2}
`)
		var ids []string
		for i := range 12 {
			ids = append(ids, n.start("one", fmt.Sprintf("one-%d", i), fmt.Sprintf(`{"tenant": "t%d"}`, i%2)).ID)
		}
		ids = append(ids, n.start("many", "many-1", `{"tenants": ["t0", "t1", "t0", "t1", "t0", "t0", "t1", "t0"]}`).ID)
		for _, id := range ids {
			n.waitStatus(id, workflow.StatusCompleted, 30*time.Second)
		}
		for _, key := range []string{"t0", "t1"} {
			if p := f.peak[key]; p > 2 {
				t.Errorf("tenant %s: %d tasks running at once, limit 2", key, p)
			}
			if p := f.maxOverlap(key); p > 2 {
				t.Errorf("tenant %s: %d recorded runs overlap, limit 2", key, p)
			}
		}
	})
}

// A rate limit spaces deliveries: 10 tasks at 20/s with a burst of 1 take
// at least 9/20 s (a lower bound: the limiter can only make it slower), and
// they are all delivered without anything but the token clock waking the
// workers. The waits are counted.
func TestStepRateLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, b.newDB(t))
		t.Cleanup(func() { st.Close() })
		if _, err := st.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		m := metrics.New()
		workers := 4
		// A poll interval far beyond the test: only the token wake-up
		// delivers the held-back tasks in time.
		eng, err := engine.New(engine.Config{Store: st, Workers: &workers, Metrics: m,
			SweepInterval: 50 * time.Millisecond, PollInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		eng.Register("call", echo)
		if err := eng.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(eng.Stop)
		n := &node{t: t, st: st, eng: eng}
		n.define(`name: calls
steps:
  - {id: c, type: task, handler: call, foreach: .input.items, rate_limit: {key: api, per_second: 20, burst: 1}}
`)
		began := time.Now()
		inst := n.start("calls", "calls-1", `{"items": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}`)
		n.waitStatus(inst.ID, workflow.StatusCompleted, 30*time.Second)
		if took, least := time.Since(began), 9*time.Second/20; took < least {
			t.Errorf("10 deliveries at 20/s with a burst of 1 took %v, less than %v", took, least)
		}
		if waits := counterValue(t, m, "flowd_rate_limit_waits_total"); waits < 1 {
			t.Errorf("flowd_rate_limit_waits_total = %v, want the waits counted", waits)
		}
	})
}

// Priorities: a start's override and the definition's, and the order a
// worker receives tasks in.
func TestPriorityClaimOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define("name: low\npriority: 2\nsteps:\n  - {id: a, type: task, handler: remote}\n")
		n.define("name: plain\nsteps:\n  - {id: a, type: task, handler: remote}\n")
		start := func(def, id string, priority int) *workflow.Instance {
			t.Helper()
			inst, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{ID: id, Definition: def, Priority: priority})
			if err != nil {
				t.Fatal(err)
			}
			return inst
		}
		if got := start("low", "low-1", 0).Priority; got != 2 {
			t.Errorf("priority of an instance of low: %d, want 2", got)
		}
		if got := start("plain", "plain-1", 0).Priority; got != workflow.DefaultPriority {
			t.Errorf("priority of an instance of plain: %d, want 3", got)
		}
		if got := start("low", "urgent-1", 5).Priority; got != 5 {
			t.Errorf("priority given 5: %d", got)
		}
		for _, p := range []int{-1, 6} {
			if _, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{Definition: "low", Priority: p}); !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("priority %d: %v, want ErrInvalidArgument", p, err)
			}
		}
		var order []string
		for range 3 {
			task, err := n.eng.Poll(context.Background(), engine.PollParams{Worker: "w", Handlers: []string{"remote"}})
			if err != nil || task == nil {
				t.Fatalf("poll: %v, %v", task, err)
			}
			order = append(order, task.WorkflowID)
		}
		if want := []string{"urgent-1", "plain-1", "low-1"}; !slices.Equal(order, want) {
			t.Errorf("delivered %v, want %v (priority 5, 3, 2)", order, want)
		}
	})
}

// heldBackRecorder sums the rate limits' waits (HeldBack.Rate and
// RateEmptied) that the store's claims return: those of claims of their
// own and those of group commits' claims.
type heldBackRecorder struct {
	store.Backend
	own, inGroup atomic.Int64
}

func (s *heldBackRecorder) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	claimed, held, err := s.Backend.ClaimTasks(ctx, p)
	s.own.Add(int64(held.Rate + held.RateEmptied))
	return claimed, held, err
}

func (s *heldBackRecorder) ApplyGroup(ctx context.Context, creates []store.CreateParams, ws []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	created, written, err := s.Backend.ApplyGroup(ctx, creates, ws, claim)
	if claim != nil {
		s.inGroup.Add(int64(claim.HeldBack.Rate + claim.HeldBack.RateEmptied))
	}
	return created, written, err
}

// What a claim held back is counted whichever claim it was: a worker's
// own, or the claim of the group commit that completed the worker's last
// task (here the second workflow's only task, whose claim empties its
// bucket). The store returns it after its transaction; the engine counts
// every one.
func TestHeldBackCountedFromEveryClaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		rec := &heldBackRecorder{}
		m := metrics.New()
		gate, running, release := gatedEcho()
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 1, metrics: m, handlers: map[string]engine.Handler{"echo": gate},
			wrap: func(st store.Backend) store.Backend { rec.Backend = st; return rec }})
		n.define(`name: limited
steps:
  - {id: a, type: task, handler: echo, rate_limit: {key: "{{ .input.id }}", per_second: 1, burst: 1}}
`)
		first := n.start("limited", "", `{"id": "x"}`)
		if id := <-running; id != first.ID {
			t.Fatalf("running %s, want %s", id, first.ID)
		}
		second := n.start("limited", "", `{"id": "y"}`)
		close(release)
		if id := <-running; id != second.ID {
			t.Fatalf("running %s, want %s", id, second.ID)
		}
		for _, inst := range []*workflow.Instance{first, second} {
			n.waitStatus(inst.ID, workflow.StatusCompleted, 10*time.Second)
		}
		if rec.inGroup.Load() == 0 {
			t.Fatalf("no group commit's claim held anything back (own claims: %d): the second task was not claimed with the first's completion",
				rec.own.Load())
		}
		want := float64(rec.own.Load() + rec.inGroup.Load())
		if got := counterValue(t, m, "flowd_rate_limit_waits_total"); got != want {
			t.Errorf("flowd_rate_limit_waits_total = %v, want %v (%d by claims of their own, %d by group commits' claims)",
				got, want, rec.own.Load(), rec.inGroup.Load())
		}
	})
}
