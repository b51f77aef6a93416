// Package bench measures flowd's atomic operations and its engine under
// concurrency and checks, from the data left in the database,
// that no update was lost.
//
// It owns the scenarios, the data they prepare and the checks they make. It
// must not know any SQL: it works through store.Backend and engine.Engine only,
// so every backend runs the same scenarios. `flowd bench` is a thin command
// around Run.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Scenario names what a run measures.
type Scenario string

// The scenarios.
const (
	// ScenarioUpdate: Get then store.UpdateState with the version read, on
	// random instances; a version mismatch is a conflict and is not retried.
	ScenarioUpdate Scenario = "update"
	// ScenarioContended: every client increments one counter.
	ScenarioContended Scenario = "contended"
	// ScenarioCompleteStep: CompleteStep on instances with many steps, each
	// client owning its instances.
	ScenarioCompleteStep Scenario = "complete-step"
	// ScenarioBatch: the engine's BatchStatus RUNNING→PAUSED and back over a large table.
	ScenarioBatch Scenario = "batch"
	// ScenarioWorkflow: 3-step workflows end to end through an in-process engine.
	ScenarioWorkflow Scenario = "workflow"
	// ScenarioHistory: one workflow of Steps steps, each outputting
	// OutputSize bytes, then its history's size measured from the database.
	ScenarioHistory Scenario = "history"
	// ScenarioForeach: workflows of one foreach step over Items items
	// through an in-process engine; an op is an iteration.
	ScenarioForeach Scenario = "foreach"
	// ScenarioQueue: Backlog single-step no-op workflows queued while no
	// worker runs, then drained by an in-process engine; an op is a step.
	ScenarioQueue Scenario = "queue"
	// ScenarioCode: the workflow scenario with the chain a code workflow
	// of three no-op steps (worker.Step), run in process as
	// server.RegisterWorkflow runs it.
	ScenarioCode Scenario = "code"
	// ScenarioCodeGrowth: one code workflow of Steps steps, each a no-op
	// outputting CodeGrowthOutputSize bytes, run in process; an op is the
	// workflow, an item a checkpoint.
	ScenarioCodeGrowth Scenario = "code-growth"
	// ScenarioBulk: Rows RUNNING instances, then one bulk cancel of them
	// through the engine's bulk worker; an op is an instance cancelled.
	ScenarioBulk Scenario = "bulk"
)

// Scenarios lists every scenario, in the documented order.
var Scenarios = []Scenario{ScenarioUpdate, ScenarioContended, ScenarioCompleteStep, ScenarioBatch, ScenarioWorkflow, ScenarioHistory, ScenarioForeach, ScenarioQueue, ScenarioCode, ScenarioCodeGrowth, ScenarioBulk}

// Modes of the contended scenario.
const (
	// ModeModify uses the engine's ModifyState: the process's writers of one
	// instance take turns, and a write that lost a race (another node's) is
	// read and decided again: no conflict reaches the client.
	ModeModify = "modify"
	// ModeRetry uses store.UpdateWithRetry: read, write with the version read,
	// back off and start over on a conflict (optimistic concurrency on the client).
	ModeRetry = "retry"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("invalid bench configuration")

// Config describes one run. Start from DefaultConfig: a field a scenario uses
// must be set (Validate says which), except those marked "0:" below.
// Validation messages name the flags of `flowd bench`.
type Config struct {
	Store    store.Backend
	Scenario Scenario
	Clients  int           // concurrent clients, at least 1
	Duration time.Duration // how long clients start new operations
	// Progress receives a progress line about every ProgressInterval (0: 1s),
	// the first few errors and the engine's warnings; nil discards them.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Measuring, when set, is called as the clients start; the function it
	// returns is called once they have stopped (workflows drained), before
	// the data is checked. flowd bench --cpuprofile profiles that span.
	Measuring func() (stopped func())

	// Growth, when set, is read before and after the measured part of the
	// foreach, history, queue, workflow, code and code-growth scenarios:
	// the bytes the database wrote meanwhile are reported in all and per
	// item (nil: only the time per item is).
	Growth GrowthMeter

	// Mode of the contended scenario: ModeModify (also for "") or ModeRetry.
	// Other scenarios have no mode.
	Mode string
	// Retry is the backoff of ModeRetry; zero fields take those of
	// store.DefaultRetryPolicy. Its OnRetry is replaced: the run counts
	// retries itself.
	Retry store.RetryPolicy
	// Instances is how many instances the update scenario spreads its writes
	// over (0: max(1000, 10×Clients)).
	Instances int
	// StateSize is the approximate size in bytes of the JSON state of the
	// update and contended instances (a counter and padding).
	StateSize int
	// Steps is the number of steps of each complete-step instance, and of
	// the history and code-growth scenarios' workflow.
	Steps int
	// OutputSize is the bytes of random text each step of the history
	// scenario outputs.
	OutputSize int
	// Rows is the size of the batch table, and the instances the bulk
	// scenario cancels; BatchSize the limit of each batch.
	Rows      int
	BatchSize int
	// Workers is the in-process step concurrency of the workflow engine
	// (code, code-growth: runs at once).
	Workers int
	// Items is the number of items of the foreach scenario's step.
	Items int
	// Backlog is how many workflows the queue scenario queues before its
	// workers start.
	Backlog int
	// Rate bounds workflow starts per second over all clients (0: as fast as
	// MaxInFlight allows).
	Rate float64
	// MaxInFlight bounds the workflows started and not yet through their last
	// step (0: 2×Workers; -1: no bound), so that a start rate the engine
	// cannot follow does not pile up a backlog that outlives Drain. A chain
	// has one task ready at a time, so 2×Workers keeps every worker busy;
	// more only adds queueing to the latency.
	MaxInFlight int
	// Drain is how long the workflow scenario waits after Duration for the
	// workflows in flight to complete.
	Drain time.Duration
	// ConcurrencyLimit, when above 0, gives the workflow scenario's
	// definition a concurrency limit of that many per key, with keys
	// spread over the workflows (concurrencyKeys) so that the limit is
	// rarely reached: the run measures what the limiter costs, not
	// queueing.
	ConcurrencyLimit int
}

// DefaultConfig returns the defaults of `flowd bench`; set Store and Scenario.
func DefaultConfig() Config {
	return Config{
		Clients: 8, Duration: 10 * time.Second, ProgressInterval: time.Second,
		Retry:     store.DefaultRetryPolicy,
		StateSize: 1024, Steps: 200, OutputSize: 2048, Rows: 20000, BatchSize: 100,
		Workers: 8, Drain: 10 * time.Second, Items: 1000, Backlog: 10000,
	}
}

// derived fills in the fields whose zero value stands for a value derived
// from others.
func (c Config) derived() Config {
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = time.Second
	}
	if c.Mode == "" && c.Scenario == ScenarioContended {
		c.Mode = ModeModify
	}
	if c.Instances == 0 {
		c.Instances = max(1000, 10*c.Clients)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 2 * c.Workers
	}
	return c
}

// Validate checks c, except Store, and only the fields its scenario uses.
// Every error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.derived()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.ConcurrencyLimit != 0 && c.Scenario != ScenarioWorkflow {
		bad("--concurrency-limit is for --scenario workflow only")
	}
	if !slices.Contains(Scenarios, c.Scenario) {
		names := make([]string, len(Scenarios))
		for i, s := range Scenarios {
			names[i] = string(s)
		}
		bad("unknown --scenario %q (want one of %s)", c.Scenario, strings.Join(names, ", "))
	}
	if c.Clients < 1 {
		bad("--clients must be at least 1, got %d", c.Clients)
	}
	if c.Duration <= 0 {
		bad("--duration must be positive, got %s", c.Duration)
	}
	switch c.Scenario {
	case ScenarioUpdate, ScenarioContended:
		if c.Instances < 1 {
			bad("--instances must be at least 1, got %d", c.Instances)
		}
		if c.StateSize < 0 {
			bad("--state-size must not be negative, got %d", c.StateSize)
		}
	case ScenarioCompleteStep, ScenarioHistory:
		if c.Steps < 1 || c.Steps > 10000 {
			bad("--steps must be in 1–10000, got %d", c.Steps)
		}
		if c.Scenario == ScenarioHistory && (c.OutputSize < 0 || c.OutputSize > 1<<20) {
			bad("--output-size must be in 0–1048576, got %d", c.OutputSize)
		}
		if c.Scenario == ScenarioHistory && c.Workers < 1 {
			bad("--workers must be at least 1, got %d", c.Workers)
		}
	case ScenarioBulk:
		if c.Rows < 1 || c.Rows > MaxBacklog {
			bad("--rows must be in 1–%d, got %d", MaxBacklog, c.Rows)
		}
	case ScenarioBatch:
		if c.Rows < 1 {
			bad("--rows must be at least 1, got %d", c.Rows)
		}
		if c.BatchSize < 1 || c.BatchSize > store.MaxBatchLimit {
			bad("--batch-size must be in 1–%d, got %d", store.MaxBatchLimit, c.BatchSize)
		}
	case ScenarioForeach:
		if c.Workers < 1 {
			bad("--workers must be at least 1, got %d", c.Workers)
		}
		if c.Items < 1 || c.Items > workflow.MaxForeachItems {
			bad("--items must be in 1–%d, got %d", workflow.MaxForeachItems, c.Items)
		}
	case ScenarioQueue:
		if c.Workers < 1 {
			bad("--workers must be at least 1, got %d", c.Workers)
		}
		if c.Backlog < 1 || c.Backlog > MaxBacklog {
			bad("--backlog must be in 1–%d, got %d", MaxBacklog, c.Backlog)
		}
	case ScenarioCodeGrowth:
		if c.Steps < 1 || c.Steps > 10000 {
			bad("--steps must be in 1–10000, got %d", c.Steps)
		}
		if c.Workers < 1 {
			bad("--workers must be at least 1, got %d", c.Workers)
		}
	case ScenarioWorkflow, ScenarioCode:
		if c.Workers < 1 {
			bad("--workers must be at least 1, got %d", c.Workers)
		}
		if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
			bad("--rate must be a non-negative number, got %v", c.Rate)
		}
		if c.MaxInFlight < -1 {
			bad("--max-inflight must be positive, or -1 for no bound, got %d", c.MaxInFlight)
		}
		if c.ConcurrencyLimit < 0 {
			bad("--concurrency-limit must not be negative, got %d", c.ConcurrencyLimit)
		}
		if c.Drain < 0 {
			bad("--drain must not be negative, got %s", c.Drain)
		}
	}
	switch {
	case c.Scenario == ScenarioContended && c.Mode != ModeModify && c.Mode != ModeRetry:
		bad("unsupported --mode %q for --scenario contended (want %s or %s)", c.Mode, ModeModify, ModeRetry)
	case c.Scenario != ScenarioContended && c.Mode != "" && slices.Contains(Scenarios, c.Scenario):
		bad("unsupported --mode %q: only --scenario contended has modes (%s, %s)", c.Mode, ModeModify, ModeRetry)
	}
	return errors.Join(errs...)
}

// Result is what a run measured and checked. The fields up to LostUpdates are
// the documented ones, in their order; the others follow.
type Result struct {
	Scenario  Scenario `json:"scenario"`
	Clients   int      `json:"clients"`
	DurationS float64  `json:"duration_s"` // measured: first op started → last op ended
	Ops       int64    `json:"ops"`        // successful operations
	OpsPerSec float64  `json:"ops_per_sec"`
	P50MS     float64  `json:"p50_ms"` // latency of the successful operations
	P99MS     float64  `json:"p99_ms"`
	Conflicts int64    `json:"conflicts"` // operations refused by a version check
	Retries   int64    `json:"retries"`   // backoff-and-retry rounds (--mode retry)
	Errors    int64    `json:"errors"`    // failures other than conflicts
	// LostUpdates is checked from the data after the run: acknowledged writes
	// the data does not hold, writes the data holds that nobody made, and
	// broken version/history invariants. It must be 0.
	LostUpdates int64 `json:"lost_updates"`

	Backend  string  `json:"backend"`
	IDPrefix string  `json:"id_prefix"` // starts every instance id the run created
	P90MS    float64 `json:"p90_ms"`
	MaxMS    float64 `json:"max_ms"`
	Mode     string  `json:"mode,omitempty"`
	// Instances is how many instances the run wrote to (update, contended,
	// complete-step) or the batch table's size.
	Instances int `json:"instances,omitempty"`
	// Batch scenario.
	BatchSize    int     `json:"batch_size,omitempty"`
	RowsMoved    int64   `json:"rows_moved,omitempty"`
	RowsPerSec   float64 `json:"rows_per_sec,omitempty"`
	EmptyBatches int64   `json:"empty_batches,omitempty"` // calls that found nothing to move; not ops
	// Workflow scenario: Ops counts the workflows that completed within the
	// duration; Completed also those that completed while draining.
	Workers     int     `json:"workers,omitempty"`
	Started     int64   `json:"started,omitempty"`
	Completed   int64   `json:"completed,omitempty"`
	StepsPerSec float64 `json:"steps_per_sec,omitempty"`
	DrainS      float64 `json:"drain_s,omitempty"`
	// ConcurrencyLimit is Config.ConcurrencyLimit; Queued counts the
	// starts that found their key's slots all held (created QUEUED).
	ConcurrencyLimit int   `json:"concurrency_limit,omitempty"`
	Queued           int64 `json:"queued,omitempty"`
	// Foreach scenario: the items of each workflow's step (Ops counts
	// their iterations; Started and Completed, workflows).
	Items int `json:"items,omitempty"`
	// History scenario: the workflow's steps and their output size; its
	// history as measured from the database (store.HistorySize: text bytes
	// of the rows' state, status and cause): rows, how many hold a whole
	// state, bytes, bytes per version, the final state's bytes and
	// history bytes / final state bytes.
	Steps                  int     `json:"steps,omitempty"`
	OutputSize             int     `json:"output_size,omitempty"`
	HistoryVersions        int64   `json:"history_versions,omitempty"`
	HistorySnapshots       int64   `json:"history_snapshots,omitempty"`
	HistoryBytes           int64   `json:"history_bytes,omitempty"`
	HistoryBytesPerVersion float64 `json:"history_bytes_per_version,omitempty"`
	FinalStateBytes        int64   `json:"final_state_bytes,omitempty"`
	HistoryRatio           float64 `json:"history_ratio,omitempty"`
	// Code-growth scenario: one checkpoint's time (the mean between two
	// steps' calls) over the first and over the last tenth of the steps;
	// flat cost keeps them close. Its history fields are the workflow's.
	CheckpointMSFirst float64 `json:"checkpoint_ms_first_tenth,omitempty"`
	CheckpointMSLast  float64 `json:"checkpoint_ms_last_tenth,omitempty"`
	// Queue scenario: the backlog queued before the drain; the workflows
	// the drain had not reached when the duration ended; the claims of one
	// task timed on the full backlog before the drain, their median and
	// slowest (Completed counts the drained workflows and the probed ones).
	Backlog     int     `json:"backlog,omitempty"`
	Remaining   int64   `json:"remaining,omitempty"`
	ClaimProbes int     `json:"claim_probes,omitempty"`
	ClaimMSP50  float64 `json:"claim_ms_p50,omitempty"`
	ClaimMSMax  float64 `json:"claim_ms_max,omitempty"`
	// Cost per item of the foreach (an iteration), history (a chain step),
	// queue (a drained step), workflow and code (a 3-step workflow) and
	// code-growth (a checkpoint) scenarios:
	// the measured part's time per
	// item and, with Config.Growth, the bytes the database wrote in it, on
	// PostgreSQL the WAL (pg_current_wal_lsn before and after), on SQLite
	// the growth of its files.
	MSPerItem              float64 `json:"ms_per_item,omitempty"`
	WALBytes               int64   `json:"wal_bytes,omitempty"`
	WALBytesPerItem        float64 `json:"wal_bytes_per_item,omitempty"`
	FileGrowthBytes        int64   `json:"file_growth_bytes,omitempty"`
	FileGrowthBytesPerItem float64 `json:"file_growth_bytes_per_item,omitempty"`
	// Interrupted: the caller's context ended the run early.
	Interrupted bool    `json:"interrupted,omitempty"`
	PrepareS    float64 `json:"prepare_s"`
	VerifyS     float64 `json:"verify_s"`
}

// Failed reports whether the run lost updates or met errors.
func (r Result) Failed() bool { return r.LostUpdates != 0 || r.Errors > 0 }

// scenario is one kind of run.
type scenario interface {
	// prepare creates the run's data; it is not measured.
	prepare(ctx context.Context) error
	// client runs operations through c until c.running() is false.
	client(ctx context.Context, c *client)
	// verify checks the data after the run and fills in res.
	verify(ctx context.Context, res *Result) error
	// close releases what prepare started, whatever happened.
	close()
}

// Run migrates cfg.Store, prepares the scenario's data, runs cfg.Clients
// clients for cfg.Duration, then checks the data. An error means the run
// could not be made or checked (bad config wraps ErrInvalidConfig); lost
// updates and operation errors are reported in the Result (see Failed).
// When ctx ends, the run stops early and is still checked.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Store == nil {
		return Result{}, fmt.Errorf("%w: Store is required", ErrInvalidConfig)
	}
	cfg = cfg.derived()
	r := newRunner(ctx, cfg)

	t0 := time.Now()
	if _, err := cfg.Store.Migrate(ctx); err != nil {
		return Result{}, fmt.Errorf("migrating the database: %w", err)
	}
	var sc scenario
	switch cfg.Scenario {
	case ScenarioUpdate:
		sc = &updateScenario{r: r}
	case ScenarioContended:
		sc = &contendedScenario{r: r}
	case ScenarioCompleteStep:
		sc = &completeStepScenario{r: r}
	case ScenarioBatch:
		sc = &batchScenario{r: r}
	case ScenarioWorkflow:
		sc = &workflowScenario{r: r}
	case ScenarioHistory:
		sc = &historyScenario{r: r}
	case ScenarioForeach:
		sc = &foreachScenario{r: r}
	case ScenarioQueue:
		sc = &queueScenario{r: r}
	case ScenarioCode:
		sc = &workflowScenario{r: r, code: true}
	case ScenarioCodeGrowth:
		sc = &codeGrowthScenario{r: r}
	case ScenarioBulk:
		sc = &bulkScenario{r: r}
	}
	defer sc.close()
	if err := sc.prepare(ctx); err != nil {
		return Result{}, fmt.Errorf("preparing the %s scenario: %w", cfg.Scenario, err)
	}
	prepared := time.Since(t0)
	r.logf("%s on %s: run %s prepared in %s; %d clients for %s", cfg.Scenario, cfg.Store.Capabilities().Name,
		r.runID, prepared.Round(time.Millisecond), cfg.Clients, cfg.Duration)

	stopped := func() {}
	if cfg.Measuring != nil {
		stopped = cfg.Measuring()
	}
	g := r.startGrowth(ctx, sc)
	elapsed := r.runClients(ctx, sc.client)
	g.stop(context.WithoutCancel(ctx))
	stopped()
	res := r.result(elapsed)
	res.PrepareS = seconds(prepared)

	// The check runs even when ctx ended the run: it is what tells whether
	// the interrupted operations were lost.
	vctx := context.WithoutCancel(ctx)
	t1 := time.Now()
	if err := sc.verify(vctx, &res); err != nil {
		return res, fmt.Errorf("checking the %s scenario's data: %w", cfg.Scenario, err)
	}
	res.VerifyS = seconds(time.Since(t1))
	g.report(&res, elapsed)
	res.Interrupted = ctx.Err() != nil
	r.logf("%s: %d ops in %.3fs, %d conflicts, %d errors, %d lost updates (checked in %.3fs)",
		cfg.Scenario, res.Ops, res.DurationS, res.Conflicts, res.Errors, res.LostUpdates, res.VerifyS)
	return res, nil
}

func seconds(d time.Duration) float64 { return round3(d.Seconds()) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
