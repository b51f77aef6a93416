package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverConfig is the river subcommand's flags.
type riverConfig struct {
	db      string
	jobs    int
	workers int
	timeout time.Duration
	// fetchCooldown is River's FetchCooldown; 0 keeps River's default
	// (100 ms), which bounds a drain at about MaxWorkers jobs per 100 ms.
	fetchCooldown time.Duration
}

func parseRiver(args []string, stderr io.Writer) (riverConfig, error) {
	var c riverConfig
	fs := newFlags("river", &c.db, stderr)
	fs.IntVar(&c.jobs, "jobs", 20000, "no-op jobs inserted before the workers start")
	fs.IntVar(&c.workers, "workers", 100, "MaxWorkers of the client's one queue")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "longest drain; jobs left then count as errors")
	fs.DurationVar(&c.fetchCooldown, "fetch-cooldown", 0, "River's FetchCooldown, the least time between two fetches (0: River's default, 100ms; at least 1ms)")
	if err := parseFlags(fs, args, &c.db); err != nil {
		return c, err
	}
	cooldown := error(nil)
	if c.fetchCooldown != 0 && c.fetchCooldown < time.Millisecond {
		cooldown = fmt.Errorf("--fetch-cooldown must be 0 (River's default) or at least 1ms, got %s", c.fetchCooldown)
	}
	return c, firstError(atLeastOne("jobs", c.jobs), atLeastOne("workers", c.workers), positive("timeout", c.timeout), cooldown)
}

// noopArgs is a job that does nothing; N is its index in the backlog.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker counts its calls per job index.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	calls []atomic.Int32
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	if n := job.Args.N; n >= 0 && n < len(w.calls) {
		w.calls[n].Add(1)
	}
	return nil
}

// runRiver: cfg.jobs no-op jobs inserted with InsertManyFast while no
// worker runs, then a client with cfg.workers workers on River's default
// queue started and timed until its last job completed. River's defaults
// otherwise, on a pgxpool with pgx's defaults.
func runRiver(ctx context.Context, cfg riverConfig, log *slog.Logger) (*Result, error) {
	m, rows0, err := startMeter(ctx, cfg.db)
	if err != nil {
		return nil, err
	}
	defer m.close()

	pool, err := pgxpool.New(ctx, cfg.db)
	if err != nil {
		return nil, fmt.Errorf("opening a pool on %s: %w", redact(cfg.db), err)
	}
	poolOpen := true
	defer func() {
		if poolOpen {
			pool.Close()
		}
	}()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("creating River's migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrating River's tables: %w", err)
	}

	worker := &noopWorker{calls: make([]atomic.Int32, cfg.jobs)}
	workers := river.NewWorkers()
	river.AddWorker(workers, worker)
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown: cfg.fetchCooldown,
		Logger:        log,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.workers}},
		Workers:       workers,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the River client: %w", err)
	}

	params := make([]river.InsertManyParams, cfg.jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{N: i}}
	}
	inserted, err := client.InsertManyFast(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("inserting the backlog: %w", err)
	}
	log.Info("backlog inserted", "jobs", inserted)

	// A buffer for every job, so that no completion event is dropped.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: cfg.jobs + 1,
	})
	defer unsubscribe()

	lsn, err := m.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the River client: %w", err)
	}
	lat := awaitCompletions(ctx, events, cfg.jobs, start, cfg.timeout, log)
	elapsed := time.Since(start)
	wal, err := m.walSince(ctx, lsn)
	if err != nil {
		return nil, err
	}

	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return nil, fmt.Errorf("stopping the River client: %w", err)
	}
	pool.Close()
	poolOpen = false
	rows, err := m.rowsWritten(ctx, 30*time.Second)
	if err != nil {
		return nil, err
	}

	res := &Result{Scenario: "river-queue", Workers: cfg.workers, Backlog: cfg.jobs, Ops: int64(len(lat))}
	if len(lat) > 0 {
		elapsed = lat[len(lat)-1] // when the last completion arrived
	}
	res.setTiming(elapsed, lat)
	res.StepsPerSec = res.OpsPerSec
	res.setWritten(wal, rows-rows0, int64(cfg.jobs))
	res.Errors = int64(cfg.jobs-inserted) + checkOnce(worker.calls, log)
	table, err := readRiverJobs(ctx, m)
	if err != nil {
		return nil, err
	}
	res.Errors += table.problems(cfg.jobs, log)
	return res, nil
}

// awaitCompletions collects completion events until want arrived, timeout
// passed or ctx ended, and returns each one's time since start, in arrival
// order.
func awaitCompletions(ctx context.Context, events <-chan *river.Event, want int, start time.Time, timeout time.Duration, log *slog.Logger) []time.Duration {
	lat := make([]time.Duration, 0, want)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for len(lat) < want {
		select {
		case ev, ok := <-events:
			if !ok {
				log.Error("the subscription closed before the drain ended", "completed", len(lat))
				return lat
			}
			if ev.Kind == river.EventKindJobCompleted {
				lat = append(lat, time.Since(start))
			}
		case <-tick.C:
			log.Info("progress", "completed", len(lat), "of", want)
		case <-deadline.C:
			log.Error("drain timed out", "completed", len(lat), "of", want, "timeout", timeout)
			return lat
		case <-ctx.Done():
			log.Error("drain interrupted", "completed", len(lat), "of", want)
			return lat
		}
	}
	return lat
}

// checkOnce returns how many jobs the worker did not run exactly once.
func checkOnce(calls []atomic.Int32, log *slog.Logger) int64 {
	var bad int64
	for i := range calls {
		if n := calls[i].Load(); n != 1 {
			if bad++; bad <= 10 {
				log.Error("job not worked exactly once", "n", i, "calls", n)
			}
		}
	}
	return bad
}

// riverJobs is what River's job table holds after the drain.
type riverJobs struct {
	total, completed, completedFirstAttempt int64
}

func readRiverJobs(ctx context.Context, m *meter) (riverJobs, error) {
	var t riverJobs
	err := m.conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
		count(*) FILTER (WHERE state = 'completed' AND attempt = 1) FROM river_job`).Scan(&t.total, &t.completed, &t.completedFirstAttempt)
	if err != nil {
		return t, fmt.Errorf("counting River's jobs: %w", err)
	}
	return t, nil
}

// problems is how many jobs of a backlog of want are missing, extra, not
// completed, or completed after more than one attempt.
func (t riverJobs) problems(want int, log *slog.Logger) int64 {
	w := int64(want)
	n := abs(t.total-w) + (t.total - t.completed) + (t.completed - t.completedFirstAttempt)
	if n != 0 {
		log.Error("River's job table disagrees", "jobs", t.total, "completed", t.completed, "completed_first_attempt", t.completedFirstAttempt, "want", want)
	}
	return n
}
