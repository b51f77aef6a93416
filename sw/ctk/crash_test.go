package ctk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// crashWorkflow calls three in-process handlers in sequence; each passes the
// order on and adds its mark, so the output shows every task's output
// reached the next task across the restart.
const crashWorkflow = `document:
  dsl: '1.0.0'
  namespace: test
  name: crash-resume
  version: '1.0.0'
do:
  - reserve:
      call: reserve
      with:
        order: ${ .order }
  - charge:
      call: charge
      with:
        order: ${ .order }
        reserved: ${ .reserved }
  - ship:
      call: ship
      with:
        order: ${ .order }
        charged: ${ .charged }
`

// A Serverless Workflow instance whose node stops between two tasks (the
// second one in flight) is finished by another node on the same database,
// from where the last write left it: every task completes exactly once in
// the history, the first handler is not run again, and the output is the
// one an uninterrupted run gives.
func TestCrashResume(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			addr := b.newDB(t)
			var reservedA, reservedB, shippedA atomic.Int32
			charging := make(chan struct{})
			var chargingOnce sync.Once
			stA := openStore(t, addr)
			nodeA := newEngine(t, stA, "node-a", nil, map[string]engine.Handler{
				"reserve": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
					reservedA.Add(1)
					return withField(task.Input, "reserved")
				},
				// charge is in flight when node A stops: it returns only
				// when the stop cancels it, and its result is not recorded.
				"charge": func(ctx context.Context, _ engine.Task) (json.RawMessage, error) {
					chargingOnce.Do(func() { close(charging) })
					<-ctx.Done()
					return nil, fmt.Errorf("node a stopping: %w", ctx.Err())
				},
				"ship": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
					shippedA.Add(1)
					return withField(task.Input, "shipped")
				},
			})
			if _, _, err := nodeA.PutDefinitionAs(t.Context(), "crash-resume", []byte(crashWorkflow)); err != nil {
				t.Fatal(err)
			}
			if _, err := nodeA.StartWorkflow(t.Context(), engine.StartParams{ID: "order-1", Definition: "crash-resume",
				Input: json.RawMessage(`{"order":"o-1"}`)}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-charging:
			case <-time.After(runDeadline):
				t.Fatalf("charge never ran on node a; instance: %s", describeInstance(t, stA, "order-1"))
			}
			nodeA.Stop()

			stB := openStore(t, addr)
			newEngine(t, stB, "node-b", nil, map[string]engine.Handler{
				"reserve": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
					reservedB.Add(1)
					return withField(task.Input, "reserved")
				},
				"charge": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
					return withField(task.Input, "charged")
				},
				"ship": func(_ context.Context, task engine.Task) (json.RawMessage, error) {
					return withField(task.Input, "shipped")
				},
			})
			inst := waitFinished(t, stB, "order-1")
			if inst.Status != workflow.StatusCompleted {
				t.Fatalf("after the restart: %s", describeInstance(t, stB, "order-1"))
			}
			var out map[string]any
			if err := json.Unmarshal(inst.Output, &out); err != nil {
				t.Fatalf("output %s: %v", inst.Output, err)
			}
			if want := `{"charged":true,"order":"o-1","shipped":true}`; mustJSONString(out) != want {
				t.Errorf("output %s, want %s", inst.Output, want)
			}
			if reservedA.Load() != 1 || reservedB.Load() != 0 || shippedA.Load() != 0 {
				t.Errorf("reserve ran %d times on node a and %d on node b (want 1 and 0); ship ran %d times on node a (want 0)",
					reservedA.Load(), reservedB.Load(), shippedA.Load())
			}
			causes := historyCauses(t, stB, "order-1")
			for _, task := range []string{"/do/0/reserve", "/do/1/charge", "/do/2/ship"} {
				if n := count(causes, "task "+task+" completed"); n != 1 {
					t.Errorf("%s completed %d times in the history, want once: %q", task, n, causes)
				}
			}
			for _, c := range causes {
				if strings.Contains(c, " faulted: ") {
					t.Errorf("a task faulted: %q", causes)
				}
			}
		})
	}
}

// withField returns the task input with field set to true: the handlers'
// outputs.
func withField(input json.RawMessage, field string) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(input, &m); err != nil {
		return nil, fmt.Errorf("input %s: %w", input, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	m[field] = true
	return json.Marshal(m)
}

// waitFinished polls the store until the instance stops running (see
// runDeadline).
func waitFinished(t *testing.T, st store.Backend, id string) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(runDeadline)
	for {
		inst, err := st.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status.StopsSteps() {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after %v: %s", inst.Status, runDeadline, describeInstance(t, st, id))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func historyCauses(t *testing.T, st store.Backend, id string) []string {
	t.Helper()
	h, err := st.History(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var causes []string
	for _, v := range h {
		causes = append(causes, v.Cause)
	}
	return causes
}

// describeInstance is the instance and its history causes, for failures.
func describeInstance(t *testing.T, st store.Backend, id string) string {
	t.Helper()
	inst, err := st.Get(t.Context(), id)
	if err != nil {
		return err.Error()
	}
	data, err := json.Marshal(inst)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s; history %q", data, historyCauses(t, st, id))
}

func count(list []string, s string) int {
	n := 0
	for _, e := range list {
		if e == s {
			n++
		}
	}
	return n
}

func mustJSONString(v any) string { return string(mustJSON(v)) }
