package faults_test

// A concurrent increment workload (update with retry and the server-side
// read-modify-write) run through a server restart and through
// terminated backends. What a fault may do to a call is fail it; what it may
// never do is lose a reported success, apply an increment twice, or leave the
// version, the state and the history disagreeing.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

const (
	workloadGoroutines = 16
	// Instances per write path: UpdateWithRetry (optimistic, conflicts
	// retried) and ModifyState (row lock, never conflicts).
	instancesPerPath = 4
	// opTimeout bounds one call, so that no writer can hang on a fault.
	opTimeout = 5 * time.Second
	// warmUp runs the workload before the fault, settle after it.
	warmUp = time.Second
	settle = 2500 * time.Millisecond
	// recoveryBound is how soon after the fault ends the last failed call
	// must have happened: only connections that died in the pool may fail
	// after it, each once.
	recoveryBound = 1500 * time.Millisecond
	// poolSize is postgres.Options' default MaxConns: after the fault, each
	// dead pooled connection fails at most one call.
	poolSize = 32
)

// fastRetry keeps UpdateWithRetry's conflicts cheap: the writers share a few
// instances on purpose.
var fastRetry = store.RetryPolicy{Base: time.Millisecond, Factor: 2, Cap: 20 * time.Millisecond, MaxAttempts: 100}

// target is one counter instance and what the writers know about it.
type target struct {
	id     string
	modify bool // written with ModifyState, else with UpdateWithRetry

	// success: calls that returned nil — each committed exactly one
	// increment. unknown: calls that failed with a connection-level error —
	// each committed at most one. gaveUp: calls that failed with a
	// conflict after every attempt — none committed.
	success, unknown, gaveUp atomic.Int64
	// successAfter counts successful calls that started after the fault.
	successAfter atomic.Int64
}

func (tg *target) path() string {
	if tg.modify {
		return "ModifyState"
	}
	return "UpdateWithRetry"
}

// workload runs the writers and classifies every outcome.
type workload struct {
	t       *testing.T
	st      store.Backend
	targets []*target

	faultEnd   atomic.Int64 // unix nanos; 0 until the fault is over
	errs       atomic.Int64
	errsAfter  atomic.Int64 // failed calls that started after the fault
	lastErr    atomic.Int64 // unix nanos of the end of the last failed call
	unexpected atomic.Int64

	mu    sync.Mutex
	kinds map[string]int // error class → count
}

func newWorkload(t *testing.T, st store.Backend, prefix string) *workload {
	w := &workload{t: t, st: st, kinds: map[string]int{}}
	for i := range 2 * instancesPerPath {
		tg := &target{id: fmt.Sprintf("%s-%d", prefix, i), modify: i >= instancesPerPath}
		createCounter(t, st, tg.id)
		w.targets = append(w.targets, tg)
	}
	return w
}

// incrementOnce runs one increment of tg through its write path.
func (w *workload) incrementOnce(ctx context.Context, tg *target) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if tg.modify {
		_, err := storetest.Modify(ctx, w.st, tg.id, func(inst *workflow.Instance) error { return increment(&inst.State) }, "increment")
		return err
	}
	_, err := store.UpdateWithRetry(ctx, w.st, tg.id, fastRetry, increment, "increment")
	return err
}

// run starts the writers; the returned function waits for them after ctx
// ends.
func (w *workload) run(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for range workloadGoroutines {
		wg.Go(func() {
			for ctx.Err() == nil {
				tg := w.targets[rand.IntN(len(w.targets))]
				after := w.faultEnd.Load() != 0
				err := w.incrementOnce(ctx, tg)
				if err != nil && ctx.Err() != nil {
					// Cut short by the end of the workload, not by a fault;
					// still an unknown outcome.
					tg.unknown.Add(1)
					return
				}
				w.record(tg, after, err)
				if err != nil {
					time.Sleep(5 * time.Millisecond) // no busy loop while the server is away
				}
			}
		})
	}
	return wg.Wait
}

func (w *workload) record(tg *target, after bool, err error) {
	if err == nil {
		tg.success.Add(1)
		if after {
			tg.successAfter.Add(1)
		}
		return
	}
	w.errs.Add(1)
	if after {
		w.errsAfter.Add(1)
	}
	w.lastErr.Store(time.Now().UnixNano())
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrInvalidArgument),
		errors.Is(err, workflow.ErrTerminal), errors.Is(err, workflow.ErrInvalidState), errors.Is(err, workflow.ErrInvalidTransition):
		// A fault must surface as a failed call, never as a wrong answer.
		if w.unexpected.Add(1) <= 5 {
			w.t.Errorf("%s on %s: error without a connection problem behind it: %v", tg.path(), tg.id, err)
		}
		tg.unknown.Add(1)
	case errors.Is(err, store.ErrConflict):
		tg.gaveUp.Add(1)
	default:
		tg.unknown.Add(1)
	}
	w.mu.Lock()
	w.kinds[errorClass(err)]++
	w.mu.Unlock()
}

// errorClass shortens an error to what a reader of the log needs.
func errorClass(err error) string {
	msg := err.Error()
	for _, c := range []struct{ needle, class string }{
		{"SQLSTATE 57P01", "terminated by the server (57P01)"},
		{"SQLSTATE 57P03", "server starting up or shutting down (57P03)"},
		{"SQLSTATE 57P02", "crash shutdown (57P02)"},
		{"the database system is", "server starting up or shutting down (57P03)"},
		{"connection refused", "connection refused"},
		{"EOF", "connection lost (EOF)"},
		{"reset by peer", "connection lost (reset)"},
		{"broken pipe", "connection lost (broken pipe)"},
		{"conn closed", "connection lost (closed)"},
		{"closed", "connection lost (closed)"},
		{"deadline exceeded", "timeout"},
		{"gave up", "conflict, gave up"},
	} {
		if strings.Contains(msg, c.needle) {
			return c.class
		}
	}
	if len(msg) > 120 {
		msg = msg[:120] + "…"
	}
	return msg
}

func (w *workload) kindsString() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for k, n := range w.kinds {
		parts = append(parts, fmt.Sprintf("%d× %s", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// runCounterFault runs the workload, injects fault in its middle, and
// checks the invariants.
func runCounterFault(t *testing.T, st store.Backend, prefix string, fault func(ctx context.Context) (string, error)) {
	w := newWorkload(t, st, prefix)
	ctx, cancel := context.WithCancel(context.Background())
	wait := w.run(ctx)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wait()
		}
	}
	defer stop()

	time.Sleep(warmUp)
	var before int64
	for _, tg := range w.targets {
		before += tg.success.Load()
	}
	if before == 0 {
		t.Fatalf("no increment succeeded in %s before the fault: %s", warmUp, w.kindsString())
	}
	errsBefore := w.errs.Load()
	faultStart := time.Now()
	what, err := fault(context.Background())
	if err != nil {
		t.Fatalf("fault: %v", err)
	}
	faultEnd := time.Now()
	w.faultEnd.Store(faultEnd.UnixNano())
	time.Sleep(settle)
	stop()
	waitForStragglers(t, st, w)

	t.Logf("fault: %s, took %s; %d increments before it; %d calls failed (%d before it, %d started after it): %s",
		what, faultEnd.Sub(faultStart).Round(time.Millisecond), before, w.errs.Load(), errsBefore, w.errsAfter.Load(), w.kindsString())
	if w.errs.Load() == errsBefore {
		t.Errorf("no call failed during the fault: it did not reach the writers, so the test proves nothing")
	}
	if last := time.Unix(0, w.lastErr.Load()); last.After(faultEnd.Add(recoveryBound)) {
		t.Errorf("a call failed %s after the fault ended; the pool should have recovered within %s",
			last.Sub(faultEnd).Round(time.Millisecond), recoveryBound)
	}
	if n := w.errsAfter.Load(); n > poolSize {
		t.Errorf("%d calls that started after the fault failed; at most one per pooled connection (%d) may", n, poolSize)
	}

	ctxCheck := context.Background()
	for _, tg := range w.targets {
		inst := checkCounter(t, st, tg.id)
		counter := counterOf(t, inst.State)
		ok, unknown, gaveUp := tg.success.Load(), tg.unknown.Load(), tg.gaveUp.Load()
		t.Logf("%s (%s): counter %d = version %d; %d succeeded, %d unknown outcome (%d of them committed), %d gave up on conflicts; %d succeeded after the fault",
			tg.id, tg.path(), counter, inst.Version, ok, unknown, counter-ok, gaveUp, tg.successAfter.Load())
		if counter < ok || counter > ok+unknown {
			t.Errorf("%s: counter %d, but %d increments reported success and %d have an unknown outcome: want %d ≤ counter ≤ %d",
				tg.id, counter, ok, unknown, ok, ok+unknown)
		}
		if tg.successAfter.Load() == 0 {
			t.Errorf("%s: no increment succeeded in the %s after the fault", tg.id, settle)
		}
		// The same store, not reopened, works without a single error.
		for i := range 5 {
			if err := w.incrementOnce(ctxCheck, tg); err != nil {
				t.Fatalf("%s: increment %d after the fault: %v", tg.id, i+1, err)
			}
		}
		after := checkCounter(t, st, tg.id)
		if got := counterOf(t, after.State); got != counter+5 {
			t.Errorf("%s: counter %d after 5 more increments from %d", tg.id, got, counter)
		}
	}
}

// waitForStragglers waits until the targets' versions stay put: a writer
// that gave up on its cancelled context may have left its statement running
// on the server, which commits it a moment later, after the writers have
// returned; the checks would read the instance before it and its history
// after it.
func waitForStragglers(t *testing.T, st store.Backend, w *workload) {
	t.Helper()
	versions := func() []int64 {
		var vs []int64
		for _, tg := range w.targets {
			inst, err := st.Get(context.Background(), tg.id)
			if err != nil {
				t.Fatalf("%s: %v", tg.id, err)
			}
			vs = append(vs, inst.Version)
		}
		return vs
	}
	last, quiet := versions(), 0
	for deadline := time.Now().Add(10 * time.Second); quiet < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := versions()
		if slices.Equal(now, last) {
			quiet++
		} else {
			last, quiet = now, 0
		}
	}
}

// TestRestartMidRun restarts the server (fast shutdown: every session is
// terminated, new connections are refused until it is back) while 16
// goroutines increment counters through UpdateWithRetry and ModifyState.
func TestRestartMidRun(t *testing.T) {
	addr := pgtest.NewDatabase(t)
	in := faultCluster(t)
	st := openStore(t, addr)
	runCounterFault(t, st, "restart", func(ctx context.Context) (string, error) {
		return "server restart", in.Restart(ctx)
	})
}

// TestTerminateBackends terminates every other backend of the database,
// several times, while the same workload runs: each writer's connection may
// die between any two statements, or during a COMMIT.
func TestTerminateBackends(t *testing.T) {
	addr := pgtest.NewDatabase(t)
	st := openStore(t, addr)
	admin := adminConn(t, addr)
	const rounds = 6
	runCounterFault(t, st, "terminate", func(ctx context.Context) (string, error) {
		killed := 0
		for i := range rounds {
			if i > 0 {
				time.Sleep(250 * time.Millisecond)
			}
			rows, err := admin.Query(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()`)
			if err != nil {
				return "", err
			}
			for rows.Next() {
				var ok bool
				if err := rows.Scan(&ok); err != nil {
					rows.Close()
					return "", err
				}
				if ok {
					killed++
				}
			}
			if err := rows.Err(); err != nil {
				return "", err
			}
		}
		if killed == 0 {
			return "", errors.New("pg_terminate_backend found no backend to terminate")
		}
		return fmt.Sprintf("%d backends terminated in %d rounds", killed, rounds), nil
	})
}
