package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// sideEffects counts the runs of each step's function.
type sideEffects struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *sideEffects) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[key]++
}

func (s *sideEffects) get(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key]
}

type order struct {
	Order string `json:"order"`
}

// A Go code workflow with steps (one retried, one failing for good and
// compensated), parallel steps, a sleep and an event wait runs to its end
// over several runs, each step's function running exactly once, and the
// recorded values (UUID) the same in every run.
func TestWorkflowRunsToItsEnd(t *testing.T) {
	b := setupServer(t, 1)
	effects := &sideEffects{n: map[string]int{}}
	flaky := 0
	runs := 0
	var mu sync.Mutex
	fn := worker.Func(func(wf *worker.WorkflowContext, in order) (map[string]any, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		id := wf.UUID()
		reserved, err := worker.Step(wf, "reserve", func(ctx context.Context) (string, error) {
			effects.add(worker.IdempotencyKey(ctx))
			return "r-" + in.Order, nil
		})
		if err != nil {
			return nil, err
		}
		retried, err := worker.Step(wf, "flaky", func(ctx context.Context) (int, error) {
			effects.add(worker.IdempotencyKey(ctx))
			if flaky++; flaky < 3 {
				return 0, errors.New("not yet")
			}
			return flaky, nil
		}, worker.WithRetry(worker.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Millisecond}))
		if err != nil {
			return nil, err
		}
		charges := []*worker.Future[int]{}
		for i := 1; i <= 2; i++ {
			charges = append(charges, worker.Go(wf, "charge", func(ctx context.Context) (int, error) {
				effects.add(worker.IdempotencyKey(ctx))
				return i * 10, nil
			}))
		}
		total := 0
		for _, f := range charges {
			v, err := f.Get()
			if err != nil {
				return nil, err
			}
			total += v
		}
		if err := wf.Set("stage", "charged"); err != nil {
			return nil, err
		}
		if err := wf.Sleep("cool-off", 200*time.Millisecond); err != nil {
			return nil, err
		}
		paid, err := worker.WaitForEvent[map[string]any](wf, "paid", "payment", worker.WithKey(in.Order))
		if err != nil {
			return nil, err
		}
		_, err = worker.Step(wf, "ship", func(ctx context.Context) (any, error) {
			effects.add(worker.IdempotencyKey(ctx))
			return nil, worker.Permanent(errors.New("no truck"))
		})
		var failed *worker.StepFailedError
		if !errors.As(err, &failed) || failed.Message != "no truck" || failed.Attempts != 1 {
			return nil, worker.Permanent(errors.New("ship should have failed for good, got " + errString(err)))
		}
		if _, err := worker.Step(wf, "release", func(ctx context.Context) (bool, error) {
			effects.add(worker.IdempotencyKey(ctx))
			return true, nil
		}); err != nil {
			return nil, err
		}
		return map[string]any{"id": id, "reserved": reserved, "retried": retried, "total": total, "paid": paid["amount"]}, nil
	})
	startWorker(t, worker.Config{Client: b.client, Workflows: map[string]worker.Workflow{"order": {Run: fn}}, Wait: time.Second})
	waitDefinition(t, b.client, "order")
	b.start(t, "order", "o-1", `{"order":"A7"}`)

	// The run waits for its payment; then the event comes.
	waitStep(t, b.client, "o-1", "paid", workflow.StepWaiting)
	if _, err := b.client.PublishEvent(t.Context(), "payment", "A7", json.RawMessage(`{"amount":30}`)); err != nil {
		t.Fatal(err)
	}
	inst := b.waitStatus(t, "o-1", workflow.StatusCompleted, 15*time.Second)
	var out map[string]any
	if err := json.Unmarshal(inst.Output, &out); err != nil {
		t.Fatal(err)
	}
	if string(inst.State.Variables["stage"]) != `"charged"` {
		t.Errorf("state.variables.stage = %s", inst.State.Variables["stage"])
	}
	var uuid string
	_ = json.Unmarshal(inst.State.Steps["flowd:uuid"].Output, &uuid)
	if out["id"] != uuid || uuid == "" || out["reserved"] != "r-A7" || out["retried"] != 3.0 || out["total"] != 30.0 || out["paid"] != 30.0 {
		t.Errorf("output = %s (recorded uuid %q)", inst.Output, uuid)
	}
	for _, key := range []string{"reserve", "charge", "charge#2", "ship", "release"} {
		if n := effects.get("o-1/" + key); n != 1 {
			t.Errorf("step %s ran %d times, want once", key, n)
		}
	}
	if n := effects.get("o-1/flaky"); n != 3 {
		t.Errorf("flaky ran %d times, want 3 (two failed attempts)", n)
	}
	if st := inst.State.Steps["flaky"]; st.Attempts != 3 {
		t.Errorf("flaky recorded with %d attempts, want 3", st.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 3 {
		t.Errorf("the function ran %d times, want 3 (the start, after the sleep, after the event)", runs)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// waitDefinition waits until the worker has put the definition name.
func waitDefinition(t *testing.T, c *client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.GetDefinition(t.Context(), name, 0); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("definition %s not put by the worker", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStep waits until step of workflow id has status.
func waitStep(t *testing.T, c *client.Client, id, step string, status workflow.StepStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		inst, err := c.GetWorkflow(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st := inst.State.Steps[step]; st != nil && st.Status == status {
			return
		}
		if time.Now().After(deadline) {
			steps, _ := json.Marshal(inst.State.Steps)
			t.Fatalf("workflow %s (%s): step %s not %s; steps %s", id, inst.Status, step, status, steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A run that returns a step's failure for good fails the workflow at once
// (a replay would give the same failure), however many runs its retry
// allows; so does a step name the server would refuse, before the step's
// function runs.
func TestWorkflowSettledErrorsAreNotRetried(t *testing.T) {
	b := setupServer(t, 1)
	var mu sync.Mutex
	runs := map[string]int{}
	ran := false
	fn := worker.Func(func(wf *worker.WorkflowContext, in order) (any, error) {
		mu.Lock()
		runs[wf.WorkflowID()]++
		mu.Unlock()
		if in.Order == "bad-name" {
			return worker.Step(wf, "no spaces", func(context.Context) (any, error) {
				mu.Lock()
				ran = true
				mu.Unlock()
				return nil, nil
			})
		}
		return worker.Step(wf, "charge", func(context.Context) (any, error) {
			return nil, worker.Permanent(errors.New("card declined"))
		})
	})
	retry := &worker.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond}
	startWorker(t, worker.Config{Client: b.client, Workflows: map[string]worker.Workflow{"order": {Run: fn, Retry: retry}}, Wait: time.Second})
	waitDefinition(t, b.client, "order")
	b.start(t, "order", "declined", `{"order":"x"}`)
	b.start(t, "order", "named", `{"order":"bad-name"}`)
	declined := b.waitStatus(t, "declined", workflow.StatusFailed, 10*time.Second)
	named := b.waitStatus(t, "named", workflow.StatusFailed, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if runs["declined"] != 1 || runs["named"] != 1 {
		t.Errorf("runs = %v, want one each", runs)
	}
	if ran {
		t.Error("the step with a bad name ran")
	}
	for _, c := range []struct {
		inst *workflow.Instance
		want string
	}{{declined, "card declined"}, {named, `step name \"no spaces\" has ' '`}} {
		if code := string(c.inst.State.Extra["code"]); !strings.Contains(code, c.want) {
			t.Errorf("%s: state.code = %s, want it to say %s", c.inst.ID, code, c.want)
		}
	}
}

// Select waits for the first of several things — here a payment or a
// deadline — and takes the same one in every later replay, even once the
// other has finished too.
func TestWorkflowSelectsTheFirstToFinish(t *testing.T) {
	b := setupServer(t, 1)
	fn := worker.Func(func(wf *worker.WorkflowContext, in order) (string, error) {
		paid := wf.Event("paid", "payment", worker.WithKey(in.Order))
		deadline := wf.Timer("deadline", 400*time.Millisecond)
		first := wf.Select(deadline, paid)
		// Replays after this sleep see both finished.
		if err := wf.Sleep("settle", 600*time.Millisecond); err != nil {
			return "", err
		}
		if first == deadline {
			return "expired", nil
		}
		amount, err := worker.Value[int](paid)
		if err != nil {
			return "", err
		}
		return "paid " + strconv.Itoa(amount), nil
	})
	startWorker(t, worker.Config{Client: b.client, Workflows: map[string]worker.Workflow{"order": {Run: fn}}, Wait: time.Second})
	waitDefinition(t, b.client, "order")
	b.start(t, "order", "in-time", `{"order":"A"}`)
	b.start(t, "order", "too-late", `{"order":"B"}`)
	waitStep(t, b.client, "in-time", "paid", workflow.StepWaiting)
	if _, err := b.client.PublishEvent(t.Context(), "payment", "A", json.RawMessage(`7`)); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"in-time": `"paid 7"`, "too-late": `"expired"`} {
		inst := b.waitStatus(t, id, workflow.StatusCompleted, 10*time.Second)
		if string(inst.Output) != want {
			t.Errorf("%s: output %s, want %s", id, inst.Output, want)
		}
	}
}
