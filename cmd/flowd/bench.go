package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/bench"
	"github.com/flowd/flowd/internal/dbgrowth"
	"github.com/flowd/flowd/internal/storeopen"
)

func newBenchCmd(e *env) *cobra.Command {
	var (
		db          string
		scenario    string
		profilePath string
		cfg         = bench.DefaultConfig()
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the store and the engine under concurrency, and check that nothing was lost",
		Long: `bench prepares its own data in the database (migrating it first; every id
starts with a fresh run prefix, so runs never collide), runs --clients clients for
--duration, prints a progress line to stderr about every second, then checks the
data and prints one JSON object as the last line of stdout:

  {"scenario", "clients", "duration_s", "ops", "ops_per_sec", "p50_ms", "p99_ms",
   "conflicts", "retries", "errors", "lost_updates", …}

Scenarios:
  update         Get, then update the state at the version read, on random instances
                 (a version mismatch counts as a conflict and is not retried)
  contended      every client increments one counter: --mode modify (row lock, no
                 conflicts; default) or --mode retry (read, write, back off on conflict)
  complete-step  complete the steps of instances with --steps steps each
  batch          move --batch-size rows RUNNING→PAUSED and back over a table of
                 --rows rows (needs a database with no other RUNNING/PAUSED instances)
  workflow       3-step workflows through an in-process engine with --workers workers
  history        one workflow of --steps steps each outputting --output-size bytes of
                 random text; reports the bytes of history per version and history
                 bytes / final state bytes, measured from the database (--duration
                 does not apply: the run ends when the workflow has)
  foreach        workflows of one foreach step over --items items (default 1000)
                 through an in-process engine with --workers workers, one at a time
                 per client; ops are iterations (ops_per_sec: iterations per second),
                 latencies whole workflows'; lost_updates counts workflows whose output
                 is not every iteration's, once, in item order
  queue          --backlog single-step no-op workflows (default 10000) queued while no
                 worker runs, then drained by an in-process engine with --workers
                 workers until empty or --duration ends; ops are steps, latencies run
                 from the drain's start to each workflow's completion; claim_ms_p50 is
                 the median of 5 one-task claims timed on the full backlog first;
                 --clients start the backlog
  code           the workflow scenario with a code workflow of 3 no-op steps
                 (worker.Step) run in process, as an embedded server's
                 RegisterWorkflow runs it; --workers runs at once
  code-growth    one code workflow of --steps steps (up to 10000), each a no-op
                 returning 100 bytes, run in process; reports the time of a
                 checkpoint over the first and the last tenth of the steps
                 (--duration does not apply: the run ends when the workflow has)
  bulk           --rows RUNNING instances (default 20000, not timed), then one bulk
                 cancel of them (POST /v1/bulk's operation) worked off by an
                 in-process engine; ops are instances cancelled (ops_per_sec:
                 instances per second), the one latency the whole operation's;
                 lost_updates counts instances not cancelled exactly once
                 (--clients and --duration do not apply)

foreach, history, queue, workflow, code and code-growth also report their cost
per item (an iteration, a chain step, a drained step, a workflow, a
checkpoint): ms_per_item, the measured part's time per item, and
on PostgreSQL wal_bytes and wal_bytes_per_item, the WAL written meanwhile
(pg_current_wal_lsn before and after: cluster-wide, so run on a cluster of its
own), on SQLite file_growth_bytes and file_growth_bytes_per_item, the growth of
the database file and its -wal file. scripts/bench-growth runs them at growing sizes.

lost_updates is checked from the data (e.g. final counters against acknowledged
increments). The exit code is 1 when it is not 0 or when any operation failed.

--db is required and must be on the command line: FLOWD_DB is not read, so that
a shell set up for a server never fills that server's database with bench data.`,
		Example: `  flowd bench --db sqlite:bench.db --scenario contended --clients 8 --duration 10s
  flowd bench --db postgres://user:pass@localhost/flowd_bench --scenario workflow --workers 16
  flowd bench --db sqlite:bench.db --scenario history --steps 200 --output-size 2048
  flowd bench --db sqlite:bench.db --scenario foreach --items 1000 --clients 2
  flowd bench --db sqlite:bench.db --scenario code --clients 8 --workers 8
  flowd bench --db postgres://user:pass@localhost/flowd_bench --scenario code-growth --steps 1000
  flowd bench --db postgres://user:pass@localhost/flowd_bench --scenario queue --backlog 20000 --duration 5m`,
		Args: cobra.NoArgs,
		// Every flag but --db may come from FLOWD_<FLAG>, as for serve.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd, func(name string) (string, bool) {
				if name == "FLOWD_DB" {
					return "", false
				}
				return e.getenv(name)
			})
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				return usageError("--db is required: name the database to fill with bench data, e.g. --db sqlite:bench.db (FLOWD_DB is not read, so that bench never writes into a server's database by accident)")
			}
			cfg.Scenario = bench.Scenario(scenario)
			if err := cfg.Validate(); err != nil {
				return &exitCodeError{code: exitUsage, err: err}
			}
			// The profile's file is created first: a path that cannot be
			// written fails the command before the database is touched.
			profile, err := newCPUProfile(profilePath)
			if err != nil {
				return err
			}
			defer profile.stop()
			ctx := cmd.Context()
			s, err := storeopen.Open(ctx, db, storeopen.Options{})
			if errors.Is(err, storeopen.ErrUnknownScheme) {
				return &exitCodeError{code: exitUsage, err: err}
			}
			if err != nil {
				return err
			}
			defer s.Close()
			cfg.Store = s
			cfg.Progress = e.stderr
			meter := openGrowthMeter(ctx, db, cfg.Scenario, e)
			if meter != nil {
				defer meter.Close()
				cfg.Growth = meter
			}
			cfg.Measuring = profile.measuring()
			res, err := bench.Run(ctx, cfg)
			if perr := profile.stop(); err == nil {
				err = perr
			}
			if err != nil {
				return err
			}
			line, err := json.Marshal(res)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", line)
			switch {
			case res.Interrupted:
				return fmt.Errorf("%s: interrupted after %.1fs (%d lost updates, %d errors)", cfg.Scenario, res.DurationS, res.LostUpdates, res.Errors)
			case res.Failed():
				return fmt.Errorf("%s: %d lost updates, %d errors", cfg.Scenario, res.LostUpdates, res.Errors)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", "database to fill with bench data, required: postgres://… or sqlite:PATH (FLOWD_DB is not read)")
	f.StringVar(&scenario, "scenario", string(bench.ScenarioUpdate), "update, contended, complete-step, batch, workflow, history, foreach, queue, code, code-growth or bulk")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the clients run")
	f.StringVar(&cfg.Mode, "mode", "", "contended: modify (default) or retry")
	f.DurationVar(&cfg.Retry.Base, "retry-base", cfg.Retry.Base, "--mode retry: backoff before the first retry (doubling, full jitter)")
	f.DurationVar(&cfg.Retry.Cap, "retry-cap", cfg.Retry.Cap, "--mode retry: longest backoff")
	f.IntVar(&cfg.Retry.MaxAttempts, "retry-attempts", cfg.Retry.MaxAttempts, "--mode retry: attempts per increment, the first included")
	f.IntVar(&cfg.Instances, "instances", 0, "update: instances written to (default max(1000, 10×clients))")
	f.IntVar(&cfg.StateSize, "state-size", cfg.StateSize, "update, contended: bytes of JSON state per instance")
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "complete-step: steps per instance; history, code-growth: steps of the workflow")
	f.IntVar(&cfg.OutputSize, "output-size", cfg.OutputSize, "history: bytes each step outputs")
	f.IntVar(&cfg.Rows, "rows", cfg.Rows, "batch: rows in the table")
	f.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "batch: rows moved per call (1–10000)")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "workflow, history, foreach, queue, code, code-growth: in-process step (code: run) concurrency")
	f.IntVar(&cfg.Items, "items", cfg.Items, "foreach: items of each workflow's foreach step (1–10000)")
	f.IntVar(&cfg.Backlog, "backlog", cfg.Backlog, "queue: workflows queued before the workers start (1–1000000)")
	f.Float64Var(&cfg.Rate, "rate", 0, "workflow, code: workflows started per second (0: as fast as --max-inflight allows)")
	f.IntVar(&cfg.MaxInFlight, "max-inflight", 0, "workflow, code: workflows in flight at most (default 2×workers; -1: no bound)")
	f.DurationVar(&cfg.Drain, "drain", cfg.Drain, "workflow, code: how long to wait after --duration for workflows in flight")
	f.IntVar(&cfg.ConcurrencyLimit, "concurrency-limit", 0, "workflow: give every workflow a definition concurrency limit of N per key, keys spread so that it is rarely reached (measures the limiter's cost; 0: none)")
	f.StringVar(&profilePath, "cpuprofile", "", "write a CPU profile of the measured part of the run (this process: clients, store client, engine) to this file, for go tool pprof")
	return cmd
}

// openGrowthMeter returns the meter of what the database writes for the
// scenarios that report their cost per item (nil for the others, and when
// the database cannot be measured: the run then reports its time per item
// alone, after a warning).
func openGrowthMeter(ctx context.Context, db string, sc bench.Scenario, e *env) *dbgrowth.Meter {
	switch sc {
	case bench.ScenarioForeach, bench.ScenarioHistory, bench.ScenarioQueue, bench.ScenarioWorkflow, bench.ScenarioCode, bench.ScenarioCodeGrowth:
	default:
		return nil
	}
	m, err := dbgrowth.Open(ctx, db)
	if err != nil {
		fmt.Fprintf(e.stderr, "flowd bench: warning: not measuring the database's growth: %v\n", err)
		return nil
	}
	return m
}

// cpuProfile is the file --cpuprofile writes; a nil *cpuProfile does nothing.
type cpuProfile struct {
	f   *os.File
	err error // from starting the profile
}

// newCPUProfile creates path for a CPU profile (nil when path is empty).
func newCPUProfile(path string) (*cpuProfile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return &cpuProfile{f: f}, nil
}

// measuring is bench.Config.Measuring: the profile covers the measured
// part of the run, not the preparation and the check of the data.
func (p *cpuProfile) measuring() func() (stopped func()) {
	if p == nil {
		return nil
	}
	return func() func() {
		if p.err = pprof.StartCPUProfile(p.f); p.err != nil {
			return func() {}
		}
		return pprof.StopCPUProfile
	}
}

// stop closes the profile's file and reports what went wrong with it;
// calling it again does nothing.
func (p *cpuProfile) stop() error {
	if p == nil || p.f == nil {
		return nil
	}
	err := errors.Join(p.err, p.f.Close())
	p.f = nil
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}
