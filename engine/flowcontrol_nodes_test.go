package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// Two nodes on one PostgreSQL database deliver tasks sharing one rate
// limit key; every delivery's time is the claim's clock reading (the
// lease's end minus the lease, as the claim stored it). The token bucket
// allows, in every window [a, b], at most burst + per_second × (b − a)
// deliveries. Windows bounded by two deliveries are the tightest, so all
// of them are checked. A bucket per node lets through about twice as
// many and a refill that ignores the elapsed time lets the burst through
// at every claim: both break the bound within the first second.
//
// The slack: a claim reads the clock before it writes the key's bucket,
// so claims may commit in an order slightly different from their clock
// readings. The bucket never refills backwards, so a claim read later but
// committed earlier adds per_second × that gap to the window before it and
// takes a token itself: a gain below one delivery while the gap stays under
// 1/per_second (100 ms here). The tolerance covers the rounding of the
// times the store keeps (microseconds), a fifth of a delivery at this rate.
func TestRateLimitAcrossNodes(t *testing.T) {
	b := postgresBackend(t)
	const (
		perSecond = 10.0
		burst     = 2
		tasks     = 24
		lease     = time.Minute
		tolerance = 20 * time.Millisecond
	)
	addr := b.newDB(t)
	var (
		mu         sync.Mutex
		deliveries []time.Time
		byNode     = map[string]int{}
	)
	record := func(node string) engine.Handler {
		return func(_ context.Context, task engine.Task) (json.RawMessage, error) {
			mu.Lock()
			deliveries = append(deliveries, task.LeaseUntil.Add(-lease))
			byNode[node]++
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		}
	}
	// Each node serves one of the two handlers, so both nodes deliver,
	// each from its own queue, and only the shared bucket holds them back.
	na := newNode(t, b, addr, nodeOpts{workers: 4, lease: lease, handlers: map[string]engine.Handler{"call-a": record("a")}})
	nb := newNode(t, b, addr, nodeOpts{workers: 4, lease: lease, handlers: map[string]engine.Handler{"call-b": record("b")}})
	na.define(fmt.Sprintf(`name: calls
steps:
  - {id: ca, type: task, handler: call-a, foreach: .input.items, rate_limit: {key: api, per_second: %[1]g, burst: %[2]d}}
  - {id: cb, type: task, handler: call-b, foreach: .input.items, rate_limit: {key: api, per_second: %[1]g, burst: %[2]d}}
`, perSecond, burst))
	items := make([]int, tasks/4)
	input, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	first := na.start("calls", "rate-1", string(input))
	second := nb.start("calls", "rate-2", string(input))
	na.waitStatus(first.ID, workflow.StatusCompleted, 30*time.Second)
	na.waitStatus(second.ID, workflow.StatusCompleted, 30*time.Second)

	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != tasks {
		t.Fatalf("%d deliveries, want %d", len(deliveries), tasks)
	}
	checkTokenBucket(t, deliveries, burst, perSecond, tolerance)
	if byNode["a"] != tasks/2 || byNode["b"] != tasks/2 {
		t.Errorf("deliveries per node %v, want %d each", byNode, tasks/2)
	}
	t.Logf("deliveries per node %v over %v", byNode, deliveries[len(deliveries)-1].Sub(deliveries[0]))
}

// checkTokenBucket fails t unless, in every window between two of the
// deliveries, there are at most burst + perSecond × (width + tolerance):
// what a token bucket of that size and rate lets through.
func checkTokenBucket(t *testing.T, deliveries []time.Time, burst int, perSecond float64, tolerance time.Duration) {
	t.Helper()
	slices.SortFunc(deliveries, func(x, y time.Time) int { return x.Compare(y) })
	for i := range deliveries {
		for j := i; j < len(deliveries); j++ {
			window := deliveries[j].Sub(deliveries[i])
			allowed := float64(burst) + perSecond*(window+tolerance).Seconds()
			if n := j - i + 1; float64(n) > allowed {
				t.Fatalf("%d deliveries within %v (from delivery %d), the bucket allows %.2f", n, window, i, allowed)
			}
		}
	}
}

// One node, on each store, with more workers than the bucket lets work:
// every window of deliveries stays within the bucket's bound (the claim
// times read from the leases, as in TestRateLimitAcrossNodes).
func TestRateLimitBucketBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const (
			perSecond = 10.0
			burst     = 2
			tasks     = 12
			lease     = time.Minute
		)
		var (
			mu         sync.Mutex
			deliveries []time.Time
		)
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 6, lease: lease, handlers: map[string]engine.Handler{
			"call": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
				mu.Lock()
				deliveries = append(deliveries, task.LeaseUntil.Add(-lease))
				mu.Unlock()
				return json.RawMessage(`{}`), nil
			},
		}})
		n.define(fmt.Sprintf(`name: calls
steps:
  - {id: c, type: task, handler: call, foreach: .input.items, rate_limit: {key: api, per_second: %g, burst: %d}}
`, perSecond, burst))
		input, err := json.Marshal(map[string]any{"items": make([]int, tasks)})
		if err != nil {
			t.Fatal(err)
		}
		inst := n.start("calls", "calls-1", string(input))
		n.waitStatus(inst.ID, workflow.StatusCompleted, 30*time.Second)
		mu.Lock()
		defer mu.Unlock()
		if len(deliveries) != tasks {
			t.Fatalf("%d deliveries, want %d", len(deliveries), tasks)
		}
		checkTokenBucket(t, deliveries, burst, perSecond, 20*time.Millisecond)
	})
}

// Two nodes on one PostgreSQL database, tasks of priorities 1–5 started
// through both while nobody polls; then the two nodes' pollers claim one
// task at a time, taking turns in an irregular pattern. Every claim must
// take a task of the highest priority still queued, whichever node started
// it and whichever node claims: the priorities come out never increasing,
// and within one priority oldest first.
//
// The claims take turns rather than run at once: a claim of one task locks
// (SKIP LOCKED) the oldest due task of every priority and keeps the
// highest, so a claim running beside it may skip a higher task that the
// other then leaves, and "claimed first" is only defined between claims
// that do not overlap.
func TestPriorityAcrossNodes(t *testing.T) {
	b := postgresBackend(t)
	const perPriority = 4
	addr := b.newDB(t)
	na := newNode(t, b, addr, nodeOpts{workers: -1})
	nb := newNode(t, b, addr, nodeOpts{workers: -1})
	na.define("name: p\nsteps:\n  - {id: a, type: task, handler: remote}\n")
	priorityOf := map[string]int{}
	var started []string // oldest first
	for i := range perPriority {
		for _, p := range []int{2, 5, 1, 3, 4} {
			id := fmt.Sprintf("prio-%d-%d", p, i)
			n := na
			if (i+p)%2 == 1 {
				n = nb
			}
			if _, err := n.eng.StartWorkflow(context.Background(), engine.StartParams{ID: id, Definition: "p", Priority: p}); err != nil {
				t.Fatal(err)
			}
			priorityOf[id] = p
			started = append(started, id)
		}
	}
	// The order the claims must follow: priority, then age.
	want := slices.Clone(started)
	slices.SortStableFunc(want, func(x, y string) int { return priorityOf[y] - priorityOf[x] })

	var got []string
	for i := range len(want) + 1 {
		n := na
		if i%3 == 1 || i%5 == 0 {
			n = nb
		}
		task, err := n.eng.Poll(context.Background(), engine.PollParams{Worker: fmt.Sprintf("w%d", i%4), Handlers: []string{"remote"}})
		if err != nil {
			t.Fatal(err)
		}
		if task == nil {
			break
		}
		got = append(got, task.WorkflowID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("claimed\n%v\nwant (priority, then oldest first)\n%v", got, want)
	}
}
