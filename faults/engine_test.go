package faults_test

// The engine across a server restart: claims, completions,
// heartbeats and sweeps fail while the server is away; nothing is restarted
// or reopened, and every instance still completes with each step's effect
// applied once.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const (
	engineInstances = 30
	engineWorkers   = 4
	// engineLease is short so that leases lost in the outage (a claim or a
	// completion whose commit the engine never heard of) expire quickly.
	engineLease = time.Second
	// handlerTime keeps handlers running while the server goes away.
	handlerTime = 80 * time.Millisecond
)

// faultChainDef: a → b → c, each step passing n on. Attempts are plentiful:
// an outage may cost a step several of them (a failed completion, an expired
// lease), and the test is about recovery, not about running out.
const faultChainDef = `
name: fault-chain
steps:
  - id: a
    type: task
    handler: work
    input: {n: "{{ .input.n }}", step: a}
    retry: {max_attempts: 20, initial_backoff: 20ms, max_backoff: 200ms}
  - id: b
    type: task
    handler: work
    depends_on: [a]
    input: {n: "{{ .steps.a.output.n }}", step: b}
    retry: {max_attempts: 20, initial_backoff: 20ms, max_backoff: 200ms}
  - id: c
    type: task
    handler: work
    depends_on: [b]
    input: {n: "{{ .steps.b.output.n }}", step: c}
    retry: {max_attempts: 20, initial_backoff: 20ms, max_backoff: 200ms}
`

type stepIO struct {
	N       int    `json:"n"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt,omitempty"`
}

type deliveryKey struct {
	wf, step string
	attempt  int
}

// deliveries records every attempt handed to the handler and reports one
// delivered twice.
type deliveries struct {
	t        *testing.T
	mu       sync.Mutex
	seen     map[deliveryKey]bool
	inFlight atomic.Int64
}

func (d *deliveries) record(task engine.Task) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := deliveryKey{task.WorkflowID, task.Step, task.Attempt}
	if d.seen[k] {
		d.t.Errorf("%s/%s attempt %d delivered twice", k.wf, k.step, k.attempt)
	}
	d.seen[k] = true
}

func (d *deliveries) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

func (d *deliveries) has(wf, step string, attempt int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[deliveryKey{wf, step, attempt}]
}

// TestEngineRestart runs 30 instances of a three-step workflow on one engine
// node with in-process handlers and restarts the server once while they run.
func TestEngineRestart(t *testing.T) {
	addr := pgtest.NewDatabase(t)
	in := faultCluster(t)
	st := openStore(t, addr)
	ctx := context.Background()

	rec := &deliveries{t: t, seen: map[deliveryKey]bool{}}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	workers := engineWorkers
	eng, err := engine.New(engine.Config{Store: st, Logger: log, Workers: &workers, Lease: engineLease,
		SweepInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register("work", func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
		rec.record(task)
		rec.inFlight.Add(1)
		defer rec.inFlight.Add(-1)
		var in stepIO
		if err := json.Unmarshal(task.Input, &in); err != nil {
			return nil, engine.Permanent(err)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(handlerTime):
		}
		return json.Marshal(stepIO{N: in.N, Step: in.Step, Attempt: task.Attempt})
	})
	if _, _, err := eng.PutDefinition(ctx, []byte(faultChainDef)); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop) // before the store closes

	began := time.Now()
	ids := make([]string, engineInstances)
	for n := range ids {
		ids[n] = fmt.Sprintf("chain-%02d", n)
		if _, err := eng.StartWorkflow(ctx, engine.StartParams{ID: ids[n], Definition: "fault-chain",
			Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))}); err != nil {
			t.Fatal(err)
		}
	}

	// Restart once a good part of the work is done and handlers are running.
	if !waitFor(15*time.Second, func() bool { return rec.count() >= engineInstances/2 }) {
		t.Fatalf("only %d deliveries within 15s", rec.count())
	}
	deliveredBefore, running := rec.count(), rec.inFlight.Load()
	restartStart := time.Now()
	if err := in.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if deliveredBefore >= 3*engineInstances {
		t.Fatalf("every step was delivered before the restart (%d deliveries): the fault came too late", deliveredBefore)
	}

	done := waitCompleted(t, st, ids, 30*time.Second)
	t.Logf("restart after %d of %d deliveries with %d handlers running, took %s; all %d instances COMPLETED %s after it (%s in all); %d deliveries in all",
		deliveredBefore, 3*engineInstances, running, restarted.Sub(restartStart).Round(time.Millisecond), engineInstances,
		time.Since(restarted).Round(time.Millisecond), time.Since(began).Round(time.Millisecond), rec.count())

	retried := 0
	for n, id := range ids {
		inst := done[id]
		for _, step := range []string{"a", "b", "c"} {
			s := inst.State.Steps[step]
			var out stepIO
			if err := json.Unmarshal(s.Output, &out); err != nil {
				t.Errorf("%s/%s output %s: %v", id, step, s.Output, err)
				continue
			}
			if out.N != n || out.Step != step {
				t.Errorf("%s/%s output %s, want n %d from step %s", id, step, s.Output, n, step)
			}
			// The recorded output is that of a delivered attempt, the last
			// one the step's state counts: no later attempt was handed out
			// once it completed.
			if !rec.has(id, step, out.Attempt) || out.Attempt != s.Attempts {
				t.Errorf("%s/%s completed by attempt %d (delivered: %v), state counts %d attempts",
					id, step, out.Attempt, rec.has(id, step, out.Attempt), s.Attempts)
			}
			if s.Attempts > 1 {
				retried++
			}
		}
		h := checkHistory(t, st, inst)
		checkStepsSettleOnce(t, id, h)
		tasks, err := st.TasksOfInstance(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 3 {
			t.Errorf("%s has %d tasks, want 3", id, len(tasks))
		}
		for _, task := range tasks {
			if task.Status != store.TaskDone || task.Lease != "" || task.LeaseOwner != "" {
				t.Errorf("%s: task %s is %s with lease %q of %q after completion", id, task.StepID, task.Status, task.Lease, task.LeaseOwner)
			}
		}
	}
	// The LISTEN connection, which lives outside the pool, came back too.
	admin := adminConn(t, addr)
	listening := waitFor(10*time.Second, func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n)
		return err == nil && n > 0
	})
	if !listening {
		t.Errorf("no session of the database is listening for notifications 10s after the restart")
	}
	t.Logf("listening again %s after the restart", time.Since(restarted).Round(time.Millisecond))
	warnings := strings.Count(logs.String(), "level=WARN")
	t.Logf("%d steps needed more than one attempt; the engine logged %d warnings while the server was away", retried, warnings)
	if t.Failed() {
		t.Logf("engine log:\n%s", logs.String())
	}
}

// waitCompleted waits until every instance is COMPLETED and returns them. It
// fails at once when one ends otherwise (FAILED, TIMED_OUT …).
func waitCompleted(t *testing.T, st store.Backend, ids []string, timeout time.Duration) map[string]*workflow.Instance {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	done := map[string]*workflow.Instance{}
	for {
		for _, id := range ids {
			if done[id] != nil {
				continue
			}
			inst, err := st.Get(ctx, id)
			if err != nil {
				t.Fatalf("get %s: %v", id, err)
			}
			switch inst.Status {
			case workflow.StatusCompleted:
				done[id] = inst
			case workflow.StatusRunning:
			default:
				b, _ := json.MarshalIndent(inst, "", "  ")
				t.Fatalf("%s ended %s:\n%s", id, inst.Status, b)
			}
		}
		if len(done) == len(ids) {
			return done
		}
		if time.Now().After(deadline) {
			for _, id := range ids {
				if done[id] == nil {
					inst, _ := st.Get(ctx, id)
					tasks, _ := st.TasksOfInstance(ctx, id)
					b, _ := json.MarshalIndent(inst, "", "  ")
					var ts []string
					for _, task := range tasks {
						ts = append(ts, fmt.Sprintf("%s %s attempt %d/%d lease until %s", task.StepID, task.Status, task.Attempt,
							task.MaxAttempts, task.LeaseUntil.Format(time.RFC3339Nano)))
					}
					t.Fatalf("%d of %d instances not COMPLETED after %s; the first:\n%s\ntasks: %v", len(ids)-len(done), len(ids), timeout, b, ts)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkStepsSettleOnce: see testkit.CheckStepsSettleOnce.
var checkStepsSettleOnce = testkit.CheckStepsSettleOnce
