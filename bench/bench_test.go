package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/bench"
	"github.com/flowd/flowd/internal/dbgrowth"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backends return the URL of a fresh database.
var backends = []struct {
	name  string
	newDB func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "bench.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
}

func open(t *testing.T, url string) store.Backend {
	t.Helper()
	s, err := storeopen.Open(t.Context(), url, storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// syncBuffer collects output written from several goroutines.
type syncBuffer = testkit.SyncBuffer

// short is a config for a ~1 s run of 4 clients with small tables: every
// scenario's invariants hold, and are checked, at any size, and SQLite (a
// C library translated to Go) is slow enough under the race detector that
// preparing the tables dominated the package's run time. The batch table
// still takes ten batches to move (so batches of both directions overlap),
// the update clients share 40 counters, and every complete-step instance
// and the history workflow still have several steps.
func short(s store.Backend, sc bench.Scenario, progress *syncBuffer) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Store, cfg.Scenario, cfg.Progress = s, sc, progress
	cfg.Clients, cfg.Duration, cfg.ProgressInterval = 4, time.Second, 250*time.Millisecond
	cfg.Rows, cfg.BatchSize, cfg.Steps, cfg.Instances, cfg.StateSize = 100, 10, 10, 40, 256
	// A foreach workflow of the default 1,000 items takes seconds to drain
	// under the race detector; 10 run every rule of the scenario (dispatch,
	// completions out of order, the output in item order), and
	// TestForeachScenario runs 40 on both stores.
	cfg.Items = 10
	// A queue of 50 is drained in a fraction of a second; TestQueueScenario
	// drains 100 on both stores.
	cfg.Backlog = 50
	cfg.Retry = store.RetryPolicy{Base: time.Millisecond, Cap: 20 * time.Millisecond, MaxAttempts: 100}
	return cfg
}

// run runs cfg and checks what every correct run satisfies.
func run(t *testing.T, cfg bench.Config) bench.Result {
	t.Helper()
	progress := cfg.Progress.(*syncBuffer)
	// Several progress ticks inside the run, whose line is checked below:
	// with one tick near its end, a loaded machine may end the run first.
	cfg.ProgressInterval = min(cfg.ProgressInterval, cfg.Duration/5)
	res, err := bench.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress)
	}
	// A workflow run this short can finish every workflow in its drain on a
	// loaded machine: then no workflow completed inside the window, but work
	// was still done and checked.
	progressed := res.Ops > 0 || ((cfg.Scenario == bench.ScenarioWorkflow || cfg.Scenario == bench.ScenarioCode) && res.Completed > 0)
	if res.LostUpdates != 0 || res.Errors != 0 || !progressed || res.Failed() {
		t.Errorf("%s: lost_updates %d, errors %d, ops %d; want 0, 0, > 0\nprogress:\n%s", cfg.Scenario, res.LostUpdates, res.Errors, res.Ops, progress)
	}
	// The history and code-growth scenarios run one workflow, the queue
	// scenario drains its backlog and the bulk scenario runs one operation,
	// often within the first progress interval: they report their own
	// lines instead.
	ownLines := cfg.Scenario == bench.ScenarioHistory || cfg.Scenario == bench.ScenarioQueue || cfg.Scenario == bench.ScenarioCodeGrowth ||
		cfg.Scenario == bench.ScenarioBulk
	if !ownLines && !strings.Contains(progress.String(), " ops=") {
		t.Errorf("no progress line in:\n%s", progress)
	}
	checkJSON(t, res)
	return res
}

// specFields are the documented result fields, in their order.
var specFields = []string{"scenario", "clients", "duration_s", "ops", "ops_per_sec", "p50_ms", "p99_ms", "conflicts", "retries", "errors", "lost_updates"}

// checkJSON checks that res is one JSON line starting with the documented
// fields, in order, with the types they imply.
func checkJSON(t *testing.T, res bench.Result) {
	t.Helper()
	line, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", line)
	if bytes.ContainsRune(line, '\n') {
		t.Fatalf("JSON spans lines: %s", line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", line)
	}
	var keys []string
	values := map[string]any{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		values[k.(string)] = v
	}
	if len(keys) < len(specFields) || strings.Join(keys[:len(specFields)], ",") != strings.Join(specFields, ",") {
		t.Fatalf("fields %v, want the documented %v first: %s", keys, specFields, line)
	}
	if values["scenario"] != string(res.Scenario) {
		t.Errorf("scenario %v", values["scenario"])
	}
	for _, k := range specFields[1:] {
		if _, ok := values[k].(json.Number); !ok {
			t.Errorf("%s is %T, want a number: %s", k, values[k], line)
		}
	}
}

func TestScenarios(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		for _, sc := range bench.Scenarios {
			t.Run(b.name+"/"+string(sc), func(t *testing.T) {
				t.Parallel()
				cfg := short(open(t, b.newDB(t)), sc, &syncBuffer{})
				if sc == bench.ScenarioWorkflow || sc == bench.ScenarioCode {
					// Its cost per workflow is measured.
					cfg = withGrowth(t, b.newDB(t), sc, &syncBuffer{})
					// Its first completion needs three steps of one workflow
					// through a FIFO queue: few in flight, a little longer,
					// so that a loaded machine (or -race) still sees one.
					cfg.MaxInFlight, cfg.Duration = 4, 2*time.Second
				}
				res := run(t, cfg)
				if res.Backend != b.name {
					t.Errorf("backend %q", res.Backend)
				}
				switch sc {
				case bench.ScenarioContended:
					if res.Conflicts != 0 || res.Retries != 0 || res.Mode != bench.ModeModify {
						t.Errorf("contended with ModifyState: mode %q, %d conflicts, %d retries; want modify, 0, 0", res.Mode, res.Conflicts, res.Retries)
					}
				case bench.ScenarioBatch:
					if res.RowsMoved < res.Ops || res.RowsPerSec <= 0 {
						t.Errorf("batch: %d rows moved in %d ops, %v rows/s", res.RowsMoved, res.Ops, res.RowsPerSec)
					}
				case bench.ScenarioWorkflow, bench.ScenarioCode:
					// On a loaded machine every workflow may complete in the
					// drain, after the window: then ops and steps/s are 0
					// (run checked that workflows completed). steps/s is
					// positive exactly when some completed in the window.
					if res.Started < res.Ops || res.Completed != res.Started || (res.StepsPerSec > 0) != (res.Ops > 0) {
						t.Errorf("workflow: started %d, completed %d, ops %d, steps/s %v", res.Started, res.Completed, res.Ops, res.StepsPerSec)
					}
					// Its measured part also waits for the workflows in
					// flight when the window ends: its time per workflow is
					// not the window's.
					checkWritten(t, b.name, res, res.Completed)
					if res.MSPerItem <= 0 {
						t.Errorf("workflow: ms_per_item %v, want > 0", res.MSPerItem)
					}
				case bench.ScenarioBulk:
					if res.Ops != int64(cfg.Rows) || res.Instances != cfg.Rows || res.OpsPerSec <= 0 || res.LostUpdates != 0 {
						t.Errorf("bulk: %d ops over %d instances, %v/s, %d lost; want every instance cancelled", res.Ops, res.Instances, res.OpsPerSec, res.LostUpdates)
					}
				case bench.ScenarioCodeGrowth:
					if res.Ops != 1 || res.Steps != cfg.Steps {
						t.Errorf("code-growth: ops %d, steps %d; want 1, %d", res.Ops, res.Steps, cfg.Steps)
					}
				}
			})
		}
		t.Run(b.name+"/contended-retry", func(t *testing.T) {
			t.Parallel()
			cfg := short(open(t, b.newDB(t)), bench.ScenarioContended, &syncBuffer{})
			cfg.Mode = bench.ModeRetry
			res := run(t, cfg)
			if res.Mode != bench.ModeRetry {
				t.Errorf("mode %q", res.Mode)
			}
			// 4 clients on one row under a read-then-write pattern: some
			// writes must have lost the race and been retried.
			if res.Retries == 0 {
				t.Logf("no retries in %d ops: the clients never collided", res.Ops)
			}
		})
	}
}

// TestRerunSameDatabase runs every scenario twice on one database, after a
// crashed batch run left a RUNNING row behind: ids never collide and the
// batch scenario cleans up after itself and after the crashed run.
func TestRerunSameDatabase(t *testing.T) {
	t.Parallel()
	s := open(t, backends[0].newDB(t))
	ctx := t.Context()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	stale, err := s.Create(ctx, store.CreateParams{ID: "bench-batch-crashed-b0000001", Status: workflow.StatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, sc := range bench.Scenarios {
			cfg := short(s, sc, &syncBuffer{})
			cfg.Duration = 300 * time.Millisecond
			run(t, cfg)
		}
	}
	got, err := s.Get(ctx, stale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCancelled {
		t.Errorf("stale bench row is %s, want CANCELLED", got.Status)
	}
	counts, err := store.CountByStatus(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if n := counts[workflow.StatusRunning] + counts[workflow.StatusPaused]; n != 0 {
		t.Errorf("%d RUNNING/PAUSED instances left behind: %v", n, counts)
	}
}

// TestBatchRefusesForeignRows: the batch scenario would move every RUNNING
// instance of the database, so it refuses to run beside ones it did not make.
func TestBatchRefusesForeignRows(t *testing.T) {
	t.Parallel()
	s := open(t, backends[0].newDB(t))
	ctx := t.Context()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, store.CreateParams{ID: "order-1", Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	_, err := bench.Run(ctx, short(s, bench.ScenarioBatch, &syncBuffer{}))
	if err == nil || !strings.Contains(err.Error(), `"order-1"`) || !strings.Contains(err.Error(), "database of its own") {
		t.Fatalf("Run: %v; want a refusal naming order-1", err)
	}
	inst, err := s.Get(ctx, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != workflow.StatusRunning || inst.Version != 0 {
		t.Errorf("order-1 was touched: %s at version %d", inst.Status, inst.Version)
	}
}

// lyingStore acknowledges every fifth write (Apply) without making it: the
// bench must notice from the data.
type lyingStore struct {
	store.Backend
	calls, lies atomic.Int64
}

func (l *lyingStore) lie() bool {
	if l.calls.Add(1)%5 != 0 {
		return false
	}
	l.lies.Add(1)
	return true
}

func (l *lyingStore) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	if !l.lie() {
		return l.Backend.Apply(ctx, w)
	}
	inst, err := l.Backend.Get(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	inst.Status, inst.State, inst.Version = w.FinalStatus(), w.State, w.NewVersion()
	return inst, nil
}

func TestLostUpdatesAreReported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sc   bench.Scenario
		mode string
	}{
		{bench.ScenarioUpdate, ""},
		{bench.ScenarioContended, bench.ModeModify},
		{bench.ScenarioContended, bench.ModeRetry},
		{bench.ScenarioCompleteStep, ""},
		{bench.ScenarioQueue, ""},
	} {
		t.Run(string(c.sc)+"/"+c.mode, func(t *testing.T) {
			t.Parallel()
			liar := &lyingStore{Backend: open(t, backends[0].newDB(t))}
			progress := &syncBuffer{}
			cfg := short(liar, c.sc, progress)
			cfg.Mode = c.mode
			// Long enough for a fifth call on a loaded machine, where a
			// batch over the whole table can take a quarter of a second.
			cfg.Duration = 3 * time.Second
			res, err := bench.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			lies := liar.lies.Load()
			if lies == 0 {
				t.Fatalf("the store never lied in %d ops", res.Ops)
			}
			if res.LostUpdates != lies || !res.Failed() {
				t.Errorf("lost_updates %d after %d lies; want them all reported\nprogress:\n%s", res.LostUpdates, lies, progress)
			}
			if !strings.Contains(progress.String(), "LOST: ") {
				t.Errorf("no LOST line in the progress output:\n%s", progress)
			}
			checkJSON(t, res)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := bench.Config{Scenario: bench.ScenarioUpdate, Clients: 1, Duration: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	for _, sc := range bench.Scenarios {
		cfg := bench.DefaultConfig()
		cfg.Scenario = sc
		if err := cfg.Validate(); err != nil {
			t.Errorf("DefaultConfig for %s: %v", sc, err)
		}
	}
	for _, c := range []struct {
		change func(*bench.Config)
		msg    string
	}{
		{func(c *bench.Config) { c.Scenario = "nope" }, `unknown --scenario "nope"`},
		{func(c *bench.Config) { c.Scenario = "" }, `unknown --scenario ""`},
		{func(c *bench.Config) { c.StateSize = -1 }, "--state-size must not be negative"},
		{func(c *bench.Config) { c.Clients = 0 }, "--clients must be at least 1"},
		{func(c *bench.Config) { c.Duration = 0 }, "--duration must be positive"},
		{func(c *bench.Config) { c.Duration = -time.Second }, "--duration must be positive"},
		{func(c *bench.Config) { c.Scenario, c.Mode = bench.ScenarioContended, "spin" }, `unsupported --mode "spin" for --scenario contended`},
		{func(c *bench.Config) { c.Mode = bench.ModeRetry }, `unsupported --mode "retry": only --scenario contended`},
		{func(c *bench.Config) { c.Scenario, c.BatchSize = bench.ScenarioBatch, store.MaxBatchLimit+1 }, "--batch-size must be in 1–10000"},
		{func(c *bench.Config) { c.Scenario, c.Rows = bench.ScenarioBatch, 0 }, "--rows must be at least 1"},
		{func(c *bench.Config) { c.Scenario, c.Steps = bench.ScenarioCompleteStep, 0 }, "--steps must be in 1–10000"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.Steps = bench.ScenarioCodeGrowth, 1, 10001 }, "--steps must be in 1–10000, got 10001"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.Steps = bench.ScenarioCodeGrowth, 0, 10 }, "--workers must be at least 1, got 0"},
		{func(c *bench.Config) { c.Scenario, c.Workers = bench.ScenarioCode, 0 }, "--workers must be at least 1, got 0"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.MaxInFlight = bench.ScenarioCode, 1, -2 }, "--max-inflight must be positive"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.ConcurrencyLimit = bench.ScenarioCode, 1, 2 }, "--concurrency-limit is for --scenario workflow only"},
		{func(c *bench.Config) { c.Scenario, c.Rate = bench.ScenarioWorkflow, -1 }, "--rate must be a non-negative number"},
		{func(c *bench.Config) { c.Scenario, c.Workers = bench.ScenarioWorkflow, 0 }, "--workers must be at least 1"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.ConcurrencyLimit = bench.ScenarioWorkflow, 1, -1 }, "--concurrency-limit must not be negative"},
		{func(c *bench.Config) { c.ConcurrencyLimit = 2 }, "--concurrency-limit is for --scenario workflow only"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.Backlog = bench.ScenarioQueue, 1, 0 }, "--backlog must be in 1–1000000, got 0"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.Backlog = bench.ScenarioQueue, 1, -5 }, "--backlog must be in 1–1000000, got -5"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.Backlog = bench.ScenarioQueue, 1, 1_000_001 }, "--backlog must be in 1–1000000, got 1000001"},
		{func(c *bench.Config) { c.Scenario, c.Workers, c.Backlog = bench.ScenarioQueue, 0, 10 }, "--workers must be at least 1, got 0"},
	} {
		cfg := ok
		c.change(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, bench.ErrInvalidConfig) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Validate: %v; want ErrInvalidConfig mentioning %q", err, c.msg)
		}
		if _, err := bench.Run(t.Context(), cfg); !errors.Is(err, bench.ErrInvalidConfig) {
			t.Errorf("Run with a config Validate refuses: %v", err)
		}
	}
	if _, err := bench.Run(t.Context(), ok); !errors.Is(err, bench.ErrInvalidConfig) {
		t.Errorf("Run without a store: %v", err)
	}
}

// countingStore counts the update scenario's writes.
type countingStore struct {
	store.Backend
	writes atomic.Int64
}

func (c *countingStore) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	c.writes.Add(1)
	return c.Backend.Apply(ctx, w)
}

// Measuring spans exactly the clients' operations: none before it is
// called, none after the function it returns is.
func TestMeasuringSpansTheClients(t *testing.T) {
	st := &countingStore{Backend: open(t, backends[0].newDB(t))}
	cfg := short(st, bench.ScenarioUpdate, &syncBuffer{})
	cfg.Duration = 300 * time.Millisecond
	var starts, stops int
	var atStart, atStop int64
	cfg.Measuring = func() func() {
		starts++
		atStart = st.writes.Load()
		return func() {
			stops++
			atStop = st.writes.Load()
		}
	}
	res := run(t, cfg)
	if starts != 1 || stops != 1 {
		t.Fatalf("Measuring called %d times, its stop %d times; want 1 and 1", starts, stops)
	}
	if total := st.writes.Load(); atStart != 0 || atStop == 0 || atStop != total || int64(res.Ops) > total {
		t.Errorf("writes: %d before Measuring, %d when stopped, %d in all, %d ops; want 0, all of them, ops ≤ writes", atStart, atStop, total, res.Ops)
	}
}

// The history scenario runs one workflow and measures its history from the
// database: the ratio is computed, within 3× the final state on both
// stores, and the history reads back.
func TestHistoryScenario(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			progress := &syncBuffer{}
			cfg := withGrowth(t, b.newDB(t), bench.ScenarioHistory, progress)
			cfg.Steps, cfg.OutputSize, cfg.Workers = 30, 2048, 2
			cfg.Duration = time.Hour // the run ends with its workflow
			res, err := bench.Run(t.Context(), cfg)
			if err != nil {
				t.Fatalf("Run: %v\nprogress:\n%s", err, progress)
			}
			if res.Failed() || res.Ops != 1 {
				t.Fatalf("lost_updates %d, errors %d, ops %d; want 0, 0, 1\nprogress:\n%s", res.LostUpdates, res.Errors, res.Ops, progress)
			}
			if res.HistoryVersions < int64(cfg.Steps)+1 || res.FinalStateBytes < int64(cfg.Steps*cfg.OutputSize) || res.HistoryBytes <= 0 {
				t.Errorf("measured %d versions, %d history bytes, final state %d bytes; want at least %d versions and %d bytes of state",
					res.HistoryVersions, res.HistoryBytes, res.FinalStateBytes, cfg.Steps+1, cfg.Steps*cfg.OutputSize)
			}
			want := round3(float64(res.HistoryBytes) / float64(res.FinalStateBytes))
			if res.HistoryRatio != want || res.HistoryRatio > 3 {
				t.Errorf("history_ratio %v (history %d / final state %d bytes), want %v and at most 3", res.HistoryRatio, res.HistoryBytes, res.FinalStateBytes, want)
			}
			if res.HistoryBytesPerVersion <= 0 || !strings.Contains(progress.String(), "ratio") {
				t.Errorf("history_bytes_per_version %v; progress:\n%s", res.HistoryBytesPerVersion, progress)
			}
			// 30 steps of 2 KB outputs write at least 60 KB, whatever the
			// store does with them, and far less than 100 times that: the
			// bytes are the run's, not the database's since it began.
			checkGrowth(t, b.name, res, 30)
			if got := max(res.WALBytes, res.FileGrowthBytes); got < 30*2048 || got > 100*30*2048 {
				t.Errorf("the run wrote %d bytes for 30 outputs of 2048", got)
			}
			checkJSON(t, res)
		})
	}
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// The foreach scenario runs workflows of one foreach step through the
// engine: ops are iterations, and every iteration's output is checked to be
// there once, in item order, on both stores.
func TestForeachScenario(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			progress := &syncBuffer{}
			cfg := withGrowth(t, b.newDB(t), bench.ScenarioForeach, progress)
			cfg.Items, cfg.Workers, cfg.Clients = 40, 4, 2
			cfg.Duration = 300 * time.Millisecond
			res := run(t, cfg)
			if res.Items != 40 || res.Completed < 1 || res.Completed != res.Started || res.Ops != res.Completed*40 {
				t.Errorf("items %d, started %d, completed %d, ops %d; want every started workflow completed and 40 ops each", res.Items, res.Started, res.Completed, res.Ops)
			}
			checkGrowth(t, b.name, res, res.Ops)
			checkJSON(t, res)
		})
	}
}

// The queue scenario drains a backlog queued before its workers start:
// every workflow completes once, after one attempt, the claim probes'
// included, and a claim at the backlog's depth is timed, on both stores.
func TestQueueScenario(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			progress := &syncBuffer{}
			cfg := withGrowth(t, b.newDB(t), bench.ScenarioQueue, progress)
			cfg.Backlog, cfg.Workers = 100, 4
			cfg.Duration = time.Minute // the run ends when the backlog is drained
			res := run(t, cfg)
			if res.Backlog != 100 || res.Remaining != 0 || res.Completed != 100 || res.Ops != 100-int64(res.ClaimProbes) {
				t.Errorf("backlog %d, remaining %d, completed %d, ops %d with %d probes; want 100, 0, 100, 100 - probes", res.Backlog, res.Remaining, res.Completed, res.Ops, res.ClaimProbes)
			}
			if res.ClaimProbes != 5 || res.ClaimMSP50 <= 0 || res.ClaimMSMax < res.ClaimMSP50 {
				t.Errorf("%d claim probes, p50 %v ms, max %v ms; want 5, > 0, max ≥ p50", res.ClaimProbes, res.ClaimMSP50, res.ClaimMSMax)
			}
			if res.StepsPerSec != res.OpsPerSec || res.OpsPerSec <= 0 || res.DurationS >= 60 {
				t.Errorf("steps/s %v, ops/s %v in %vs; want the drain's rate, before the duration ended", res.StepsPerSec, res.OpsPerSec, res.DurationS)
			}
			checkGrowth(t, b.name, res, res.Ops)
			checkJSON(t, res)
		})
	}
}

// withGrowth is short's config of scenario sc on the database at url,
// with that database's growth meter.
func withGrowth(t *testing.T, url string, sc bench.Scenario, progress *syncBuffer) bench.Config {
	t.Helper()
	cfg := short(open(t, url), sc, progress)
	m, err := dbgrowth.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cfg.Growth = m
	return cfg
}

// checkGrowth checks the cost per item of a run of items items with a
// growth meter: the time, and the bytes written (checkWritten).
func checkGrowth(t *testing.T, backend string, res bench.Result, items int64) {
	t.Helper()
	checkWritten(t, backend, res, items)
	// duration_s is rounded to the millisecond: a short run's time per
	// item is known to within a millisecond over the items (and 1 %).
	lo, hi := (res.DurationS-0.0005)*1000/float64(items), (res.DurationS+0.0005)*1000/float64(items)
	if res.MSPerItem <= 0 || res.MSPerItem < round3(lo*0.99) || res.MSPerItem > round3(hi*1.01) {
		t.Errorf("ms_per_item %v over %d items in %vs; want about %v", res.MSPerItem, items, res.DurationS, round3(res.DurationS*1000/float64(items)))
	}
}

// checkWritten checks the bytes a run of items items with a growth meter
// wrote, WAL on PostgreSQL and file growth on SQLite, in all and per item.
func checkWritten(t *testing.T, backend string, res bench.Result, items int64) {
	t.Helper()
	written, perItem, other := res.WALBytes, res.WALBytesPerItem, res.FileGrowthBytes
	if backend == "sqlite" {
		written, perItem, other = res.FileGrowthBytes, res.FileGrowthBytesPerItem, res.WALBytes
	}
	if items <= 0 || written <= 0 || other != 0 || perItem != round3(float64(written)/float64(items)) {
		t.Errorf("%s: %d bytes written, %v per item over %d items, %d of the other store's kind; want > 0, their quotient, 0", backend, written, perItem, items, other)
	}
}
