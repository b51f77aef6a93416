package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// dbosConfig is the dbos subcommand's flags.
type dbosConfig struct {
	db       string
	clients  int
	duration time.Duration
}

func parseDBOS(args []string, stderr io.Writer) (dbosConfig, error) {
	var c dbosConfig
	fs := newFlags("dbos", &c.db, stderr)
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients, each running one workflow at a time")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "how long the clients start workflows")
	if err := parseFlags(fs, args, &c.db); err != nil {
		return c, err
	}
	return c, firstError(atLeastOne("clients", c.clients), positive("duration", c.duration))
}

// chainSteps is how many steps each workflow runs.
const chainSteps = 3

// chain is the measured workflow: three steps that each add one to what
// the previous returned, so the result proves that all three ran in order.
func chain(ctx dbos.Context, input int64) (int64, error) {
	v := input
	for range chainSteps {
		prev := v
		var err error
		v, err = dbos.RunAsStep(ctx, func(context.Context) (int64, error) { return prev + 1, nil })
		if err != nil {
			return 0, err
		}
	}
	return v, nil
}

// runDBOS: cfg.clients clients each run chain with RunWorkflow and wait
// for its result with GetResult, one after the other, for cfg.duration,
// on DBOS's defaults (its own pool, schema "dbos").
func runDBOS(ctx context.Context, cfg dbosConfig, log *slog.Logger) (*Result, error) {
	m, rows0, err := startMeter(ctx, cfg.db)
	if err != nil {
		return nil, err
	}
	defer m.close()

	dctx, err := dbos.NewContext(ctx, dbos.Config{DatabaseURL: cfg.db, AppName: "peers-bench", Logger: log})
	if err != nil {
		return nil, fmt.Errorf("creating the DBOS context: %w", err)
	}
	dbos.RegisterWorkflow(dctx, chain)
	if err := dbos.Launch(dctx); err != nil {
		return nil, fmt.Errorf("launching DBOS: %w", err)
	}
	launched := true
	defer func() {
		if launched {
			_ = dbos.Shutdown(dctx, 10*time.Second)
		}
	}()

	lsn, err := m.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	d := &dbosDriver{ctx: dctx, log: log}
	elapsed := d.run(ctx, cfg)
	wal, err := m.walSince(ctx, lsn)
	if err != nil {
		return nil, err
	}

	if err := dbos.Shutdown(dctx, 10*time.Second); err != nil {
		return nil, fmt.Errorf("shutting DBOS down: %w", err)
	}
	launched = false
	rows, err := m.rowsWritten(ctx, 30*time.Second)
	if err != nil {
		return nil, err
	}

	res := &Result{Scenario: "dbos-workflow", Clients: cfg.clients, Ops: d.ok.Load()}
	res.Errors = d.errs.Load()
	res.Errors += checkDBOSRows(ctx, m, res.Ops, log)
	res.setTiming(elapsed, d.latencies())
	res.StepsPerSec = round3(res.OpsPerSec * chainSteps)
	res.setWritten(wal, rows-rows0, res.Ops)
	return res, nil
}

// dbosDriver runs the clients and keeps what they measured.
type dbosDriver struct {
	ctx  dbos.Context
	log  *slog.Logger
	seq  atomic.Int64
	ok   atomic.Int64
	errs atomic.Int64
	mu   sync.Mutex
	lat  []time.Duration
}

// run starts the clients, reports progress every second, and returns the
// time from the first start to the last result.
func (d *dbosDriver) run(ctx context.Context, cfg dbosConfig) time.Duration {
	start := time.Now()
	stop := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for range cfg.clients {
		wg.Go(func() { d.client(ctx, stop) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return time.Since(start)
		case <-tick.C:
			d.log.Info("progress", "workflows", d.ok.Load(), "errors", d.errs.Load())
		}
	}
}

// client runs one workflow at a time until stop (or ctx's end), checking
// each result.
func (d *dbosDriver) client(ctx context.Context, stop time.Time) {
	var lat []time.Duration
	for time.Now().Before(stop) && ctx.Err() == nil {
		input := d.seq.Add(1) * 1000
		t0 := time.Now()
		h, err := dbos.RunWorkflow(d.ctx, chain, input)
		if err != nil {
			d.fail("starting a workflow", err)
			continue
		}
		got, err := h.GetResult()
		if err != nil {
			d.fail("waiting for workflow "+h.GetWorkflowID(), err)
			continue
		}
		if want := input + chainSteps; got != want {
			d.fail("workflow "+h.GetWorkflowID(), fmt.Errorf("returned %d, want %d", got, want))
			continue
		}
		lat = append(lat, time.Since(t0))
		d.ok.Add(1)
	}
	d.mu.Lock()
	d.lat = append(d.lat, lat...)
	d.mu.Unlock()
}

func (d *dbosDriver) fail(what string, err error) {
	if d.errs.Add(1) <= 10 {
		d.log.Error(what, "err", err)
	}
}

func (d *dbosDriver) latencies() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lat
}

// checkDBOSRows compares DBOS's tables with the workflows the clients saw
// succeed: as many SUCCESS workflows, and each step's output recorded. It
// returns how many are missing or extra (0 when they agree).
func checkDBOSRows(ctx context.Context, m *meter, ok int64, log *slog.Logger) int64 {
	var succeeded, steps int64
	err := m.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'),
		(SELECT count(*) FROM dbos.operation_outputs)`).Scan(&succeeded, &steps)
	if err != nil {
		log.Error("reading DBOS's tables", "err", err)
		return 1
	}
	off := abs(succeeded-ok) + abs(steps-ok*chainSteps)
	if off != 0 {
		log.Error("DBOS's tables disagree with the clients", "workflows_succeeded", succeeded, "steps_recorded", steps, "clients_ok", ok)
	}
	return off
}

func abs(n int64) int64 { return max(n, -n) }
