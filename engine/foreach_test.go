package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const boundedDef = `
name: bounded
steps:
  - {id: each, type: task, handler: resize, foreach: .input.images, max_concurrency: 3, input: {image: '{{ .item }}', i: '{{ .index }}'}}
  - {id: after, type: task, handler: echo, depends_on: [each], input: '{{ .steps.each.output }}'}
`

// TestForeachBoundedUnderConcurrentWorkers: with more workers than the
// bound, the iterations delivered at once (queued or leased) never exceed
// max_concurrency — counted in the store at every completion — and the
// step's output is in item order.
func TestForeachBoundedUnderConcurrentWorkers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const items = 12
		var n *node
		var overs, indexMissing atomic.Int32
		var maxSeen atomic.Int32
		resize := func(ctx context.Context, task engine.Task) (json.RawMessage, error) {
			tasks, err := n.st.TasksOfInstance(ctx, task.WorkflowID)
			if err != nil {
				return nil, err
			}
			active := int32(0)
			for _, row := range tasks {
				if row.StepID == "each" && row.Status.Active() {
					active++
				}
			}
			if active > 3 {
				overs.Add(1)
			}
			for {
				m := maxSeen.Load()
				if active <= m || maxSeen.CompareAndSwap(m, active) {
					break
				}
			}
			var in struct {
				Image string `json:"image"`
				I     int    `json:"i"`
			}
			if err := json.Unmarshal(task.Input, &in); err != nil {
				return nil, err
			}
			if task.Index == nil || *task.Index != in.I {
				indexMissing.Add(1)
			}
			return json.RawMessage(fmt.Sprintf(`"done %s"`, in.Image)), nil
		}
		n = newNode(t, b, b.newDB(t), nodeOpts{workers: 8, handlers: map[string]engine.Handler{"resize": resize, "echo": echo}})
		n.define(boundedDef)
		images := make([]string, items)
		want := make([]string, items)
		for i := range images {
			images[i] = fmt.Sprintf("img-%02d", i)
			want[i] = "done " + images[i]
		}
		in, _ := json.Marshal(map[string]any{"images": images})
		n.start("bounded", "b-1", string(in))
		inst := n.waitStatus("b-1", workflow.StatusCompleted, 30*time.Second)
		if overs.Load() > 0 {
			t.Errorf("%d completions saw more than 3 iterations delivered at once (at most %d)", overs.Load(), maxSeen.Load())
		}
		if indexMissing.Load() > 0 {
			t.Errorf("%d handler calls without the iteration's index", indexMissing.Load())
		}
		wantOut, _ := json.Marshal(want)
		if got := output(t, inst, "each"); got != string(wantOut) {
			t.Errorf("output %s, want %s", got, wantOut)
		}
		if got := output(t, inst, "after"); got != string(wantOut) {
			t.Errorf("the dependent's output %s", got)
		}
		var it map[string]int
		if err := json.Unmarshal(inst.State.Steps["each"].Extra["iterations"], &it); err != nil || len(it) != 4 ||
			it["total"] != items || it["completed"] != items || it["failed"] != 0 || it["running"] != 0 {
			t.Errorf("iterations %s (%v)", inst.State.Steps["each"].Extra["iterations"], err)
		}
		h := n.checkHistory(inst)
		completions := 0
		for _, e := range h {
			if strings.HasPrefix(e.Cause, `step "each" iteration `) && strings.Contains(e.Cause, " completed (attempt ") {
				completions++
			}
		}
		if completions != items {
			t.Errorf("%d history rows of iteration completions, want one per iteration (%d)", completions, items)
		}
	})
}

const failingEachDef = `
name: failing-each
steps:
  - {id: each, type: task, handler: remote, foreach: .input, retry: {max_attempts: 1}, input: '{{ .item }}'}
`

// TestForeachFailureCancelsIterationsAndRetry: an iteration that fails for
// good fails the step and cancels the others' tasks in the same write (a
// late completion is refused); retry re-runs the failed and cancelled
// iterations on their rows and keeps the completed one.
func TestForeachFailureCancelsIterationsAndRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(failingEachDef)
		n.start("failing-each", "f-1", `["a","b","c"]`)
		byIndex := map[int]*engine.Task{}
		for range 3 {
			task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Wait: 5 * time.Second})
			if err != nil || task == nil {
				t.Fatalf("poll: %v, %v", task, err)
			}
			if task.Index == nil {
				t.Fatalf("polled iteration without an index: %+v", task)
			}
			byIndex[*task.Index] = task
		}
		if err := n.eng.CompleteTask(ctx, byIndex[0].ID, byIndex[0].Lease, json.RawMessage(`"A"`)); err != nil {
			t.Fatal(err)
		}
		if err := n.eng.FailTask(ctx, byIndex[1].ID, byIndex[1].Lease, "boom", true); err != nil {
			t.Fatal(err)
		}
		// The same write cancelled iteration 2's task.
		row, err := n.st.Task(ctx, byIndex[2].ID)
		if err != nil || row.Status != store.TaskCancelled {
			t.Fatalf("iteration 2's task after the failure: %+v, %v; want CANCELLED", row, err)
		}
		err = n.eng.CompleteTask(ctx, byIndex[2].ID, byIndex[2].Lease, json.RawMessage(`"late"`))
		if !errors.Is(err, engine.ErrLeaseLost) && !errors.Is(err, engine.ErrNotRunning) {
			t.Errorf("late completion of a cancelled iteration: %v, want a lost lease", err)
		}
		inst, err := n.st.Get(ctx, "f-1")
		if err != nil {
			t.Fatal(err)
		}
		if st := inst.State.Steps["each"]; inst.Status != workflow.StatusFailed || st.Status != workflow.StepFailed || st.Error != "iteration 1: boom" {
			t.Fatalf("after the failure: %s, step %+v", inst.Status, st)
		}
		n.checkHistory(inst)

		if _, err := n.eng.Action(ctx, "f-1", "retry"); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for range 2 {
			task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Wait: 5 * time.Second})
			if err != nil || task == nil {
				t.Fatalf("poll after retry: %v, %v", task, err)
			}
			seen[*task.Index] = true
			if task.ID != byIndex[*task.Index].ID {
				t.Errorf("iteration %d re-ran on a new row %s, want its row %s", *task.Index, task.ID, byIndex[*task.Index].ID)
			}
			if err := n.eng.CompleteTask(ctx, task.ID, task.Lease, json.RawMessage(fmt.Sprintf(`"again %d"`, *task.Index))); err != nil {
				t.Fatal(err)
			}
		}
		if !seen[1] || !seen[2] {
			t.Errorf("re-run iterations %v, want 1 and 2", seen)
		}
		inst = n.waitStatus("f-1", workflow.StatusCompleted, 5*time.Second)
		if got := output(t, inst, "each"); got != `["A","again 1","again 2"]` {
			t.Errorf("output %s", got)
		}
		n.checkHistory(inst)
	})
}

// TestForeachOverNothingCompletesTheInstance: a foreach over an empty
// array completes its step with [] at once, and an instance with nothing
// else to run completes.
func TestForeachOverNothingCompletesTheInstance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define("name: none\nsteps:\n  - {id: each, type: task, handler: h, foreach: .input.items}\n")
		inst := n.start("none", "n-1", `{"items":[]}`)
		if inst.Status != workflow.StatusCompleted || output(t, inst, "each") != "[]" {
			t.Errorf("started: %s, output %s", inst.Status, output(t, inst, "each"))
		}
		n.checkHistory(inst)
		failed := n.start("none", "n-2", `{"items":{"a":1}}`)
		if st := failed.State.Steps["each"]; failed.Status != workflow.StatusFailed || st.Error != "foreach: gave an object, want an array" {
			t.Errorf("a foreach over an object: %s, step %+v", failed.Status, st)
		}
	})
}

// TestForeachConcurrentCompletionsKeepEveryOutput: iterations completed
// at once each land in a versioned write of their own (a history row each,
// versions contiguous), and every output is kept, in item order.
func TestForeachConcurrentCompletionsKeepEveryOutput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define("name: wide\nsteps:\n  - {id: each, type: task, handler: remote, foreach: '[range(12)]', input: '{{ .index }}'}\n")
		n.start("wide", "w-1", `{}`)
		var tasks []*engine.Task
		for range 12 {
			task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Wait: 5 * time.Second})
			if err != nil || task == nil {
				t.Fatalf("poll: %v, %v", task, err)
			}
			tasks = append(tasks, task)
		}
		var wg sync.WaitGroup
		for _, task := range tasks {
			wg.Go(func() {
				if err := n.eng.CompleteTask(ctx, task.ID, task.Lease, json.RawMessage(fmt.Sprint(*task.Index*10))); err != nil {
					t.Errorf("complete %d: %v", *task.Index, err)
				}
			})
		}
		wg.Wait()
		inst := n.waitStatus("w-1", workflow.StatusCompleted, 5*time.Second)
		if got := output(t, inst, "each"); got != `[0,10,20,30,40,50,60,70,80,90,100,110]` {
			t.Errorf("output %s", got)
		}
		h := n.checkHistory(inst)
		if len(h) != 1+12 { // start, a completion per iteration (a delivery writes none)
			t.Errorf("%d history rows, want 13", len(h))
		}
	})
}

// TestForeachHTTPStep: an http step with foreach sends one request per
// item, each with its iteration's idempotency key, and its output lists the
// responses in item order.
func TestForeachHTTPStep(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"o": %q, "key": %q}`, r.URL.Query().Get("o"), r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()
	b := backends[0]
	n := newNode(t, b, b.newDB(t), nodeOpts{})
	n.define(`
name: hooks
steps:
  - id: call
    type: http
    foreach: .input.orders
    max_concurrency: 2
    request: {method: GET, url: "` + srv.URL + `/hook?o={{ .item }}"}
`)
	inst := n.waitStatus(n.start("hooks", "hs-1", `{"orders": ["o-1", "o-2", "o-3"]}`).ID, workflow.StatusCompleted, 10*time.Second)
	want := `[{"status":200,"body":{"o":"o-1","key":"hs-1/call/0"}},{"status":200,"body":{"o":"o-2","key":"hs-1/call/1"}},{"status":200,"body":{"o":"o-3","key":"hs-1/call/2"}}]`
	if got := output(t, inst, "call"); got != want {
		t.Errorf("output %s, want %s", got, want)
	}
}

// TestForeachLeaseExpiryFailsTheStep: an iteration whose lease ends with no
// attempt left fails the step through the sweeper, which cancels the other
// iterations in the same write; an iteration's lease fences that iteration
// alone.
func TestForeachLeaseExpiryFailsTheStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: -1})
		n.define(failingEachDef)
		n.start("failing-each", "x-1", `["a","b"]`)
		short, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Lease: 200 * time.Millisecond, Wait: 5 * time.Second})
		if err != nil || short == nil {
			t.Fatalf("poll: %v, %v", short, err)
		}
		long, err := n.eng.Poll(ctx, engine.PollParams{Worker: "w", Handlers: []string{"remote"}, Lease: time.Hour, Wait: 5 * time.Second})
		if err != nil || long == nil {
			t.Fatalf("poll: %v, %v", long, err)
		}
		// The other iteration's lease does not complete this one.
		if err := n.eng.CompleteTask(ctx, short.ID, long.Lease, json.RawMessage(`1`)); !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("completing with another iteration's lease: %v, want a lost lease", err)
		}
		inst := n.waitStatus("x-1", workflow.StatusFailed, 10*time.Second)
		want := fmt.Sprintf("iteration %d: lease expired (attempt 1)", *short.Index)
		if st := inst.State.Steps["each"]; st.Status != workflow.StepFailed || st.Error != want {
			t.Errorf("step %+v, want FAILED %q", st, want)
		}
		if row, err := n.st.Task(ctx, long.ID); err != nil || row.Status != store.TaskCancelled {
			t.Errorf("the other iteration's task: %+v, %v; want CANCELLED", row, err)
		}
		n.checkHistory(inst)
	})
}
