package faults_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/workflow"
)

// The tests of this package share one cluster and stop or restart it, so none
// of them may call t.Parallel.
func TestMain(m *testing.M) { pgtest.Main(m) }

// faultCluster returns the server for a test that stops or restarts it and
// makes sure that it runs again when the test ends, even when the test failed
// while it was down. Call it after pgtest.NewDatabase: cleanups run last
// registered first, so the server is back before the database is dropped.
func faultCluster(t *testing.T) *pgtest.Instance {
	t.Helper()
	in := pgtest.Cluster(t)
	if in.External() {
		t.Skip("FLOWD_TEST_POSTGRES_URL names an external server, which this test cannot stop or restart")
	}
	t.Cleanup(func() {
		if serverUp(pgtest.ServerURL(t)) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := in.Start(ctx); err != nil {
			t.Errorf("restarting the cluster the test left down: %v", err)
		}
	})
	return in
}

// serverUp reports whether the server answers a query within a second.
func serverUp(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	return err == nil
}

// openStore opens and migrates a store on addr, closed when the test ends.
func openStore(t *testing.T, addr string) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, addr, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// adminConn is a plain connection to addr, outside any store, for the
// test's own SQL (pg_stat_activity, pg_terminate_backend, lock probes).
func adminConn(t *testing.T, addr string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// The counter tests keep an integer in state.variables.counter.
const counterVar = "counter"

// counterState is the initial state of a counter instance.
func counterState() workflow.State {
	return workflow.State{Variables: map[string]json.RawMessage{counterVar: json.RawMessage("0")}}
}

// increment adds one to the counter; it is the update function of every
// writer, so it must depend on nothing but the state it is given.
func increment(s *workflow.State) error {
	var n int64
	if _, err := s.Var(counterVar, &n); err != nil {
		return err
	}
	if s.Variables == nil {
		s.Variables = map[string]json.RawMessage{}
	}
	s.Variables[counterVar] = json.RawMessage(strconv.FormatInt(n+1, 10))
	return nil
}

// counterOf reads the counter of a state.
func counterOf(t *testing.T, s workflow.State) int64 {
	t.Helper()
	var n int64
	if ok, err := s.Var(counterVar, &n); err != nil || !ok {
		t.Fatalf("state has no integer counter (present %v, err %v): %v", ok, err, s.Variables)
	}
	return n
}

// createCounter creates a RUNNING instance whose counter is 0 at version 0.
func createCounter(t *testing.T, st store.Backend, id string) {
	t.Helper()
	_, err := st.Create(context.Background(), store.CreateParams{ID: id, Status: workflow.StatusRunning, State: counterState()})
	if err != nil {
		t.Fatal(err)
	}
}

// checkCounter asserts what every counter instance must satisfy whatever
// faults it went through: version == counter (each change is one increment
// and bumps the version once), history versions exactly 0..version, and the
// state of history version v has counter v (no increment lost, applied twice
// or written under the wrong version). It returns the instance.
func checkCounter(t *testing.T, st store.Backend, id string) *workflow.Instance {
	t.Helper()
	ctx := context.Background()
	inst, err := st.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	if n := counterOf(t, inst.State); n != inst.Version {
		t.Errorf("%s: counter %d at version %d; every version must be exactly one increment", id, n, inst.Version)
	}
	h, err := st.History(ctx, id, 0, 0)
	if err != nil {
		t.Fatalf("history %s: %v", id, err)
	}
	if int64(len(h)) != inst.Version+1 {
		t.Errorf("%s: %d history rows for version %d", id, len(h), inst.Version)
	}
	for i, e := range h {
		if e.Version != int64(i) {
			t.Errorf("%s: history row %d has version %d", id, i, e.Version)
			break
		}
		if n := counterOf(t, e.State); n != e.Version {
			t.Errorf("%s: history version %d has counter %d", id, e.Version, n)
			break
		}
	}
	return inst
}

// checkHistory asserts that inst's history versions are exactly
// 0..inst.Version and returns the history.
func checkHistory(t *testing.T, st store.Backend, inst *workflow.Instance) []store.HistoryEntry {
	t.Helper()
	h, err := st.History(context.Background(), inst.ID, 0, 0)
	if err != nil {
		t.Fatalf("history %s: %v", inst.ID, err)
	}
	if int64(len(h)) != inst.Version+1 {
		t.Errorf("%s: %d history rows for version %d", inst.ID, len(h), inst.Version)
	}
	for i, e := range h {
		if e.Version != int64(i) {
			t.Errorf("%s: history row %d has version %d", inst.ID, i, e.Version)
			break
		}
	}
	return h
}

// syncBuffer collects output written from several goroutines.
type syncBuffer = testkit.SyncBuffer

// waitFor polls cond every 10ms until it holds or timeout passes, and
// reports whether it held.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
