package engine_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// openAtClock opens a migrated store of backend b on addr, writing its
// timestamps at now.
func openAtClock(t *testing.T, b backend, addr string, now func() time.Time) store.Backend {
	t.Helper()
	var (
		st  store.Backend
		err error
	)
	if b.name == "postgres" {
		st, err = postgres.Open(t.Context(), addr, postgres.Options{Now: now})
	} else {
		st, err = sqlite.Open(t.Context(), addr, sqlite.Options{Now: now})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// finishMany creates n instances named prefix-0000… of def and moves
// them through RUNNING to status, all in one group write.
func finishMany(t *testing.T, st store.Backend, prefix, def string, n int, status workflow.Status) []string {
	t.Helper()
	ids := make([]string, n)
	creates := make([]store.CreateParams, n)
	ws := make([]*store.Write, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
		creates[i] = store.CreateParams{ID: ids[i], Definition: def, Status: workflow.StatusRunning}
		ws[i] = &store.Write{ID: ids[i], From: workflow.StatusRunning, Status: status, Cause: "finished"}
	}
	if _, _, err := st.ApplyGroup(t.Context(), creates, ws, nil); err != nil {
		t.Fatal(err)
	}
	return ids
}

// deletedLogged sums the counts of the "deleted expired workflows" lines
// of a JSON log.
func deletedLogged(t *testing.T, log *syncBuffer) (total, lines int) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	for sc.Scan() {
		var line struct {
			Msg   string `json:"msg"`
			Count int    `json:"count"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		if line.Msg == "deleted expired workflows" {
			total += line.Count
			lines++
		}
	}
	return total, lines
}

// counterValue reads a counter without labels from m's registry.
func counterValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// Two nodes on one PostgreSQL database sweep at the same moment: every
// expired instance is deleted exactly once (the nodes' counters and log
// lines add up to the number of expired instances, and none is left),
// while live instances of any age and recently finished ones stay. More
// than two batches expire, so both nodes have work while the other holds
// rows.
func TestRetentionSweepAcrossNodes(t *testing.T) {
	t.Parallel()
	b := postgresBackend(t)
	addr := b.newDB(t)
	clock := &manualClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
	seed := openAtClock(t, b, addr, clock.Now)
	const expired = 2*store.MaxDeleteFinished + 500
	var old []string
	for i, status := range workflow.StopStatuses {
		n := expired / len(workflow.StopStatuses)
		if i == 0 {
			n += expired % len(workflow.StopStatuses)
		}
		old = append(old, finishMany(t, seed, "old-"+string(status), "", n, status)...)
	}
	live := []string{"live-pending", "live-running", "live-paused"}
	for _, id := range live {
		if _, err := seed.Create(t.Context(), store.CreateParams{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range live[1:] {
		if _, err := storetest.Transition(t.Context(), seed, store.TransitionParams{ID: id, From: workflow.StatusPending, To: workflow.StatusRunning}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := storetest.Transition(t.Context(), seed, store.TransitionParams{ID: "live-paused", From: workflow.StatusRunning, To: workflow.StatusPaused}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	recent := finishMany(t, seed, "recent", "", 5, workflow.StatusCompleted)
	clock.Advance(30 * time.Minute)

	logs := &syncBuffer{}
	type sweeper struct {
		eng *engine.Engine
		m   *metrics.Metrics
	}
	var nodes []sweeper
	for _, name := range []string{"node-a", "node-b"} {
		m := metrics.New()
		none := 0
		eng, err := engine.New(engine.Config{
			Store: observed.Wrap(openAtClock(t, b, addr, clock.Now), nil, m), Metrics: m, Workers: &none, NodeID: name,
			Now: clock.Now, Retention: time.Hour, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, sweeper{eng, m})
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() {
			<-start
			errs[i] = n.eng.Sweep(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Sweep on node %d: %v", i, err)
		}
	}

	var counted float64
	for _, n := range nodes {
		counted += counterValue(t, n.m, "flowd_workflows_deleted_total")
	}
	if counted != expired {
		t.Errorf("flowd_workflows_deleted_total adds up to %v over both nodes, want %d (each expired instance once)", counted, expired)
	}
	if logged, lines := deletedLogged(t, logs); logged != expired || lines < 3 {
		t.Errorf("log lines say %d deleted in %d batches, want %d in at least 3", logged, lines, expired)
	}
	for _, id := range old {
		if _, err := seed.Get(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired %s after the sweeps: %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range append(live, recent...) {
		if _, err := seed.Get(t.Context(), id); err != nil {
			t.Errorf("%s after the sweeps: %v, want it kept", id, err)
		}
	}
}

// A definition's retention replaces the server's for its instances, 0
// keeps them for ever, and the latest revision decides; instances of
// other definitions and free-form ones follow the server's retention, and
// a server without one keeps them.
func TestRetentionPerDefinition(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		clock := &manualClock{now: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
		st := openAtClock(t, b, addr, clock.Now)
		newEngine := func(retention time.Duration) *engine.Engine {
			t.Helper()
			none := 0
			eng, err := engine.New(engine.Config{Store: st, Workers: &none, Now: clock.Now, Retention: retention})
			if err != nil {
				t.Fatal(err)
			}
			return eng
		}
		eng := newEngine(time.Hour)
		for _, def := range []string{
			"name: short\nretention: 10m\nsteps: [{id: a, type: wait}]",
			"name: long\nretention: 48h\nsteps: [{id: a, type: wait}]",
			"name: keep\nretention: 0\nsteps: [{id: a, type: wait}]",
			"name: plain\nsteps: [{id: a, type: wait}]",
		} {
			if _, _, err := eng.PutDefinition(t.Context(), []byte(def)); err != nil {
				t.Fatal(err)
			}
		}
		for _, def := range []string{"short", "long", "keep", "plain", ""} {
			finishMany(t, st, "done-"+def, def, 2, workflow.StatusCompleted)
		}
		for _, def := range []string{"short", "keep", ""} {
			if _, err := st.Create(t.Context(), store.CreateParams{ID: "live-" + def, Definition: def, Status: workflow.StatusRunning}); err != nil {
				t.Fatal(err)
			}
		}
		left := func() []string {
			t.Helper()
			page, err := st.List(t.Context(), store.ListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, inst := range page.Instances {
				ids = append(ids, inst.ID)
			}
			slices.Sort(ids)
			return ids
		}
		sweep := func(e *engine.Engine, after time.Duration, want ...string) {
			t.Helper()
			clock.Advance(after)
			if err := e.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
			want = append(want, "live-", "live-keep", "live-short")
			slices.Sort(want)
			if got := left(); !slices.Equal(got, want) {
				t.Errorf("after %s more: left %v, want %v", after, got, want)
			}
		}
		// The short definition's own 10m.
		sweep(eng, 30*time.Minute, "done--0000", "done--0001", "done-keep-0000", "done-keep-0001",
			"done-long-0000", "done-long-0001", "done-plain-0000", "done-plain-0001")
		// A server without retention keeps the instances that follow it.
		sweep(newEngine(0), 2*time.Hour, "done--0000", "done--0001", "done-keep-0000", "done-keep-0001",
			"done-long-0000", "done-long-0001", "done-plain-0000", "done-plain-0001")
		// The server's hour: free-form instances and plain's.
		sweep(eng, 0, "done-keep-0000", "done-keep-0001", "done-long-0000", "done-long-0001")
		// long's own 48h.
		sweep(eng, 48*time.Hour, "done-keep-0000", "done-keep-0001")
		// keep's 0: for ever.
		sweep(eng, 1000*time.Hour, "done-keep-0000", "done-keep-0001")
		// Until its latest revision says nothing: then the server's hour.
		if _, _, err := eng.PutDefinition(t.Context(), []byte("name: keep\nsteps: [{id: a, type: wait}]")); err != nil {
			t.Fatal(err)
		}
		sweep(eng, time.Minute)
	})
}

// A negative retention is refused.
func TestRetentionNegative(t *testing.T) {
	st := openWithClock(t, backends[0], time.Now)
	_, err := engine.New(engine.Config{Store: st, Retention: -time.Hour})
	if err == nil || !strings.Contains(err.Error(), "Retention must not be negative") {
		t.Errorf("engine.New with Retention -1h: %v", err)
	}
}
