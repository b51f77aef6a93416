package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The queue scenario's definition: one task step whose handler does
// nothing, so that what a drain measures is claiming and completing.
const (
	queueDefName = "flowd-bench-queue"
	queueStep    = "only"
	queueHandler = "flowd-bench-queue-noop"
	queueDef     = `{"name": "` + queueDefName + `", "steps": [{"id": "` + queueStep + `", "type": "task", "handler": "` + queueHandler + `"}]}`
)

// Claim probes: before the drain, claimProbes single-task claims are timed
// on the full backlog, under their own owner and lease (as a remote worker
// would claim), and their tasks completed through the engine.
const (
	claimProbes     = 5
	claimProbeOwner = "flowd-bench"
	claimProbeLease = time.Minute
)

// MaxBacklog bounds --backlog: a queue scenario's backlog is created one
// workflow at a time, and a million already takes long.
const MaxBacklog = 1_000_000

// queueScenario: prepare starts cfg.Backlog single-step workflows while no
// worker runs, so that their tasks wait QUEUED, and times a few claims at
// that depth; then an in-process engine with cfg.Workers workers drains
// the backlog. An op is a step completed in the drain; its latency runs
// from the drain's start (every task was due before it) to its
// workflow's COMPLETED write.
type queueScenario struct {
	r   *runner
	eng *engine.Engine
	ids []string
	// probed are the workflows whose task a claim probe took and
	// completed before the drain; claimLat the probes' durations.
	probed   map[string]bool
	claimLat []time.Duration
	// handled counts the handler's calls per workflow; calls the total.
	handled sync.Map // workflow id → *atomic.Int64
	calls   atomic.Int64
	// drainStart is when the workers started.
	drainStart time.Time
}

func (q *queueScenario) prepare(ctx context.Context) error {
	eng, err := q.r.newEngine(ctx, queueHandler, q.handle, queueDefName, queueDef)
	if err != nil {
		return err
	}
	q.eng = eng
	if err := q.createBacklog(ctx); err != nil {
		return err
	}
	return q.probeClaims(ctx)
}

// createBacklog starts the workflows through the engine (not started: no
// worker claims meanwhile), several at once where the store has concurrent
// writers, with a progress line about every ProgressInterval.
func (q *queueScenario) createBacklog(ctx context.Context) error {
	n := q.r.cfg.Backlog
	q.ids = make([]string, n)
	for i := range q.ids {
		q.ids[i] = fmt.Sprintf("%sq%07d", q.r.prefix, i)
	}
	var created atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(q.r.cfg.ProgressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				q.r.logf("queue: backlog %d/%d created", created.Load(), n)
			}
		}
	})
	defer func() { close(done); wg.Wait() }()
	return q.r.forEach(ctx, n, func(i int) error {
		inst, err := q.eng.StartWorkflow(ctx, engine.StartParams{ID: q.ids[i], Definition: queueDefName})
		if err != nil {
			return fmt.Errorf("starting %s: %w", q.ids[i], err)
		}
		if inst.Status != workflow.StatusRunning {
			return fmt.Errorf("starting %s: it is %s, want RUNNING with its task queued", inst.ID, inst.Status)
		}
		created.Add(1)
		return nil
	})
}

// probeClaims times claimProbes claims of one task each on the full
// backlog and completes each claimed task through the engine, as a remote
// worker would: the probed workflows are done before the drain starts.
func (q *queueScenario) probeClaims(ctx context.Context) error {
	q.probed = map[string]bool{}
	for range min(claimProbes, q.r.cfg.Backlog) {
		t0 := time.Now()
		claimed, _, err := q.r.s.ClaimTasks(ctx, store.ClaimParams{
			Queues: []string{queueHandler}, Now: time.Now(), Limit: 1, Owner: claimProbeOwner, Lease: claimProbeLease,
		})
		took := time.Since(t0)
		if err != nil {
			return fmt.Errorf("timing a claim: %w", err)
		}
		if len(claimed) != 1 {
			return fmt.Errorf("a claim on the backlog leased %d tasks, want 1", len(claimed))
		}
		t := claimed[0].Task
		if !strings.HasPrefix(t.InstanceID, q.r.prefix) {
			return fmt.Errorf("a claim leased task %s of %s, not of this run: the database has other %s tasks queued; give the bench a database of its own", t.ID, t.InstanceID, queueHandler)
		}
		q.claimLat = append(q.claimLat, took)
		q.probed[t.InstanceID] = true
		if err := q.eng.CompleteTask(ctx, t.ID, t.Lease, json.RawMessage(`{}`)); err != nil {
			return fmt.Errorf("completing the claimed task %s: %w", t.ID, err)
		}
	}
	return nil
}

// handle is the no-op handler; it counts its calls per workflow of this
// run (a task another run left queued is run, not counted).
func (q *queueScenario) handle(_ context.Context, t engine.Task) (json.RawMessage, error) {
	if !strings.HasPrefix(t.WorkflowID, q.r.prefix) {
		return json.RawMessage(`{}`), nil
	}
	n, _ := q.handled.LoadOrStore(t.WorkflowID, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	q.r.ops.Add(1)
	q.calls.Add(1)
	return json.RawMessage(`{}`), nil
}

// client 0 starts the workers and waits until the handler has run for
// every task of the backlog (or the run ends), then shuts the engine down,
// which waits for the completions in progress to be written; the other
// clients have nothing to do (they created the backlog).
func (q *queueScenario) client(ctx context.Context, c *client) {
	if c.id != 0 {
		return
	}
	q.drainStart = time.Now()
	if err := q.eng.Start(ctx); err != nil {
		q.r.classify("start the engine", "", err)
		return
	}
	want := int64(len(q.ids) - len(q.probed))
	for q.calls.Load() < want && c.running() {
		time.Sleep(time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := q.eng.Shutdown(sctx); err != nil {
		q.r.fail("shutdown", "", err)
	}
}

// verify reads every workflow of the backlog: each must be COMPLETED once
// (a history of versions 0…current with no gap and one COMPLETED row) with
// its step's one attempt, and its handler run at most once; the probed ones
// without a handler call. A workflow the drain did not reach before the
// duration ended is counted as remaining, not lost, and cancelled, so that
// its task does not wait in the next run's queue. lost_updates counts the
// workflows that break a rule.
func (q *queueScenario) verify(ctx context.Context, res *Result) error {
	q.eng.Stop()
	m := &mismatches{r: q.r}
	var broken, remaining, probedDone atomic.Int64
	lat := make([]time.Duration, len(q.ids))
	drained := make([]bool, len(q.ids))
	err := q.r.forEach(ctx, len(q.ids), func(i int) error {
		id := q.ids[i]
		calls := int64(0)
		if n, ok := q.handled.Load(id); ok {
			calls = n.(*atomic.Int64).Load()
		}
		inst, err := q.r.s.Get(ctx, id)
		if err != nil {
			return err
		}
		if inst.Status != workflow.StatusCompleted {
			if calls == 0 && inst.Status == workflow.StatusRunning && !q.probed[id] {
				remaining.Add(1)
				if _, err := q.eng.Action(ctx, id, "cancel"); err != nil {
					return fmt.Errorf("cancelling %s, which the drain did not reach: %w", id, err)
				}
				return nil
			}
			broken.Add(1)
			m.report("workflow %s is %s at version %d after its task was run", id, inst.Status, inst.Version)
			return nil
		}
		if problem := q.completedProblem(inst, calls); problem != "" {
			broken.Add(1)
			m.report("workflow %s: %s", id, problem)
			return nil
		}
		h, err := q.r.s.History(ctx, id, 0, 0)
		if err != nil {
			return err
		}
		ok := int64(len(h)) == inst.Version+1
		completions := 0
		for v, e := range h {
			ok = ok && e.Version == int64(v)
			if e.Status == workflow.StatusCompleted {
				completions++
			}
		}
		if !ok || completions != 1 {
			broken.Add(1)
			m.report("workflow %s at version %d has a history of %d rows with %d COMPLETED, want 0…%d and one", id, inst.Version, len(h), completions, inst.Version)
			return nil
		}
		if q.probed[id] {
			probedDone.Add(1)
		} else {
			drained[i], lat[i] = true, inst.UpdatedAt.Sub(q.drainStart)
		}
		return nil
	})
	if err != nil {
		return err
	}
	done := kept(lat, drained)
	res.Ops = int64(len(done))
	res.setTiming(q.r.stopped.Sub(q.r.started), done)
	res.StepsPerSec = res.OpsPerSec
	res.Workers = q.r.cfg.Workers
	res.Backlog = q.r.cfg.Backlog
	res.Remaining = remaining.Load()
	res.Completed = int64(len(done)) + probedDone.Load()
	res.ClaimProbes = len(q.claimLat)
	sorted := slices.Sorted(slices.Values(q.claimLat))
	res.ClaimMSP50 = ms(percentile(sorted, 0.50))
	res.ClaimMSMax = ms(percentile(sorted, 1))
	res.LostUpdates = broken.Load()
	q.r.logf("queue: %d of %d drained in %.3fs (%.0f steps/s); a claim at the full backlog took %.3f ms (median of %d)",
		res.Ops, res.Backlog, res.DurationS, res.StepsPerSec, res.ClaimMSP50, res.ClaimProbes)
	return nil
}

// completedProblem says what is wrong with a COMPLETED workflow of the
// backlog ("" when nothing is): its step must be COMPLETED after one
// attempt, run by the drain's handler once, or by nobody here when a
// claim probe took it.
func (q *queueScenario) completedProblem(inst *workflow.Instance, calls int64) string {
	st := inst.State.Steps[queueStep]
	switch {
	case st == nil || st.Status != workflow.StepCompleted:
		return "COMPLETED without its step COMPLETED"
	case st.Attempts != 1:
		return fmt.Sprintf("its step took %d attempts, want 1", st.Attempts)
	case q.probed[inst.ID] && calls != 0:
		return fmt.Sprintf("a claim probe completed its task, and the handler ran it %d times too", calls)
	case !q.probed[inst.ID] && calls != 1:
		return fmt.Sprintf("the handler ran its task %d times, want once", calls)
	}
	return ""
}

func (q *queueScenario) close() {
	if q.eng != nil {
		q.eng.Stop()
	}
}
