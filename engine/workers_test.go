package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
)

// manualClock only moves when told to.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// recordCounter counts the worker records that reach the store.
type recordCounter struct {
	store.Backend
	n atomic.Int64
}

func (r *recordCounter) RecordWorker(ctx context.Context, w store.WorkerRecord) error {
	r.n.Add(1)
	return r.Backend.RecordWorker(ctx, w)
}

// pollingEngine is an engine without workers, as a node that serves only the
// tasks API, on a manual clock.
func pollingEngine(t *testing.T, st store.Backend, node string, clock *manualClock) *engine.Engine {
	t.Helper()
	none := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &none, NodeID: node, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func poll(t *testing.T, eng *engine.Engine, worker string, handlers ...string) {
	t.Helper()
	task, err := eng.Poll(t.Context(), engine.PollParams{Worker: worker, Handlers: handlers})
	if err != nil || task != nil {
		t.Fatalf("Poll(%q, %v) = %v, %v; want no task and no error", worker, handlers, task, err)
	}
}

func listWorkers(t *testing.T, eng *engine.Engine) []store.WorkerRecord {
	t.Helper()
	ws, err := eng.ListWorkers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestPollRecordsWorkerThrottled: many concurrent polls of one worker write
// one record; the next write comes when the record is a few seconds old or
// the handlers change. A worker leaves the list after five minutes, and the
// sweeper deletes it.
func TestPollRecordsWorkerThrottled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, b.newDB(t))
		t.Cleanup(func() { st.Close() })
		if _, err := st.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		counted := &recordCounter{Backend: st}
		start := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
		clock := &manualClock{now: start}
		eng := pollingEngine(t, counted, "node-a", clock)

		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 5 {
					if _, err := eng.Poll(t.Context(), engine.PollParams{Worker: "w1", Handlers: []string{"b", "a"}}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if n := counted.n.Load(); n != 1 {
			t.Fatalf("80 concurrent polls within a second wrote %d worker records, want 1", n)
		}
		want := []store.WorkerRecord{{Worker: "w1", Handlers: []string{"a", "b"}, Node: "node-a", LastPollAt: start}}
		if diff := cmp.Diff(want, listWorkers(t, eng)); diff != "" {
			t.Fatalf("ListWorkers (-want +got):\n%s", diff)
		}

		clock.Advance(4 * time.Second)
		poll(t, eng, "w1", "a", "b")
		if n := counted.n.Load(); n != 1 {
			t.Errorf("a poll 4s after the record wrote again (%d records)", n)
		}
		clock.Advance(time.Second)
		poll(t, eng, "w1", "a", "b")
		if n := counted.n.Load(); n != 2 {
			t.Errorf("a poll 5s after the record: %d records, want 2", n)
		}
		poll(t, eng, "w1", "c")
		if n := counted.n.Load(); n != 3 {
			t.Errorf("a poll with other handlers: %d records, want 3", n)
		}
		want = []store.WorkerRecord{{Worker: "w1", Handlers: []string{"c"}, Node: "node-a", LastPollAt: start.Add(5 * time.Second)}}
		if diff := cmp.Diff(want, listWorkers(t, eng)); diff != "" {
			t.Errorf("ListWorkers after the handlers changed (-want +got):\n%s", diff)
		}

		clock.Advance(engine.WorkersWindow)
		if diff := cmp.Diff(want, listWorkers(t, eng)); diff != "" {
			t.Errorf("ListWorkers exactly five minutes after the last poll (-want +got):\n%s", diff)
		}
		clock.Advance(time.Microsecond)
		if ws := listWorkers(t, eng); len(ws) != 0 {
			t.Errorf("ListWorkers more than five minutes after the last poll = %+v, want none", ws)
		}
		clock.Advance(time.Minute)
		if err := eng.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if ws, err := st.ListWorkers(t.Context(), start.Add(-time.Hour)); err != nil || len(ws) != 0 {
			t.Errorf("stored workers after a sweep = %+v, %v; want none: the sweeper deletes them", ws, err)
		}
	})
}

// TestPollRefusesUnlistableWorker: a worker name the list cannot hold is
// refused before anything is claimed.
func TestPollRefusesUnlistableWorker(t *testing.T) {
	st := backends[0].open(t, backends[0].newDB(t))
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	eng := pollingEngine(t, st, "node-a", &manualClock{now: time.Now()})
	for _, worker := range []string{strings.Repeat("w", store.MaxWorkerNameLength+1), "w\x00", "w\xff"} {
		_, err := eng.Poll(t.Context(), engine.PollParams{Worker: worker, Handlers: []string{"a"}})
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "worker name") {
			t.Errorf("Poll(worker %.20q) = %v, want ErrInvalidArgument naming the worker name", worker, err)
		}
	}
}

// TestWorkersOfEveryNode: two nodes on one database each list the remote
// workers the other served and the other's in-process pool.
func TestWorkersOfEveryNode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		nodes := make([]*engine.Engine, 2)
		for i, name := range []string{"node-a", "node-b"} {
			st := b.open(t, addr)
			t.Cleanup(func() { st.Close() })
			if _, err := st.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			workers := 1
			eng, err := engine.New(engine.Config{Store: st, Workers: &workers, NodeID: name,
				SweepInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			eng.Register("greet-"+name, echo)
			eng.Register("echo", echo)
			if err := eng.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(eng.Stop)
			nodes[i] = eng
		}
		poll(t, nodes[0], "remote-1", "resize")
		poll(t, nodes[1], "remote-2", "send", "resize")

		type key struct{ worker, node, handlers string }
		want := []key{
			{"node-a", "node-a", "echo,greet-node-a"},
			{"node-b", "node-b", "echo,greet-node-b"},
			{"remote-1", "node-a", "resize"},
			{"remote-2", "node-b", "resize,send"},
		}
		for i, eng := range nodes {
			var got []key
			deadline := time.Now().Add(10 * time.Second)
			for {
				got = got[:0]
				for _, w := range listWorkers(t, eng) {
					if time.Since(w.LastPollAt) > time.Minute {
						t.Errorf("worker %q: last_poll_at %v is not recent", w.Worker, w.LastPollAt)
					}
					got = append(got, key{w.Worker, w.Node, strings.Join(w.Handlers, ",")})
				}
				slices.SortFunc(got, func(a, b key) int { return strings.Compare(a.worker, b.worker) })
				if cmp.Equal(want, got, cmp.AllowUnexported(key{})) || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
				t.Errorf("node %d: ListWorkers (-want +got):\n%s", i, diff)
			}
		}
	})
}
