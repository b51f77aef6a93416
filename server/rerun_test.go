package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// rerunBundle is a server whose in-process handler "count" counts its
// calls per workflow and step (per item for a foreach iteration) and
// returns the step, the item and the call's number.
type rerunBundle struct {
	t   *testing.T
	s   *server.Server
	mu  sync.Mutex
	hit map[string]int // "workflow/step" or "workflow/step/index" → calls
}

func newRerunBundle(t *testing.T, db string) *rerunBundle {
	b := &rerunBundle{t: t, hit: map[string]int{}}
	b.s = start(t, server.Config{DB: db}, map[string]engine.Handler{"count": b.count})
	return b
}

func (b *rerunBundle) count(_ context.Context, t engine.Task) (json.RawMessage, error) {
	key := t.WorkflowID + "/" + t.Step
	if t.Index != nil {
		key += fmt.Sprintf("/%d", *t.Index)
	}
	b.mu.Lock()
	b.hit[key]++
	n := b.hit[key]
	b.mu.Unlock()
	return json.Marshal(map[string]any{"step": t.Step, "in": t.Input, "call": n})
}

// calls is the number of calls of each key, for the keys given.
func (b *rerunBundle) calls(keys ...string) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for _, k := range keys {
		out[k] = b.hit[k]
	}
	return out
}

type rerunResp struct {
	status int
	header http.Header
	body   string
}

func (b *rerunBundle) do(method, path, body string) rerunResp {
	b.t.Helper()
	req, err := http.NewRequest(method, b.s.URL()+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "DELETE" {
		req.Header.Set("If-Match", "*")
	}
	if strings.HasPrefix(path, "/v1/definitions/") && method == "PUT" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return rerunResp{res.StatusCode, res.Header, string(raw)}
}

func (b *rerunBundle) want(r rerunResp, status int, what string) rerunResp {
	b.t.Helper()
	if r.status != status {
		b.t.Fatalf("%s: %d %s, want %d", what, r.status, r.body, status)
	}
	return r
}

// finished waits until instance id is no longer RUNNING and returns it.
func (b *rerunBundle) finished(id string) *workflow.Instance {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		inst, err := b.s.Store().Get(b.t.Context(), id)
		if err != nil {
			b.t.Fatal(err)
		}
		if inst.Status.StopsSteps() {
			return inst
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s is still %s: %v", id, inst.Status, inst.State.Steps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rerun re-runs id with body and returns the new instance's id, checking
// the 201, its Location and its link to id.
func (b *rerunBundle) rerun(id, body string) string {
	b.t.Helper()
	r := b.want(b.do("POST", "/v1/workflows/"+id+"/rerun", body), 201, "rerun of "+id+" with "+body)
	var inst struct {
		ID      string `json:"id"`
		RerunOf string `json:"rerun_of"`
	}
	if err := json.Unmarshal([]byte(r.body), &inst); err != nil {
		b.t.Fatal(err)
	}
	if inst.RerunOf != id || r.header.Get("Location") != "/v1/workflows/"+inst.ID || r.header.Get("ETag") == "" {
		b.t.Fatalf("rerun of %s: rerun_of %q, Location %q, ETag %q", id, inst.RerunOf, r.header.Get("Location"), r.header.Get("ETag"))
	}
	return inst.ID
}

// sameRecord fails unless step's record is the same in both instances.
func sameRecord(t *testing.T, a, b *workflow.Instance, step string) {
	t.Helper()
	x, y := a.State.Steps[step], b.State.Steps[step]
	if x == nil || y == nil || x.Status != y.Status || string(x.Output) != string(y.Output) || x.Attempts != y.Attempts {
		t.Errorf("step %s: %s has %+v, %s has %+v; want the same record", step, a.ID, x, b.ID, y)
	}
}

// Re-runs of a chain and of a diamond run the step they start from and
// every step after it again, and keep the others' records (outputs,
// attempts) without running them; each re-run links to its original and
// the original lists its re-runs.
func TestRerunFromStep(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		b := newRerunBundle(t, db)
		b.want(b.do("PUT", "/v1/definitions/chain", `name: chain
steps:
  - {id: a, type: task, handler: count}
  - {id: b, type: task, handler: count, depends_on: [a], input: {from_a: '{{ .steps.a.output.call }}'}}
  - {id: c, type: task, handler: count, depends_on: [b]}
`), 201, "chain")
		b.want(b.do("PUT", "/v1/definitions/diamond", `name: diamond
steps:
  - {id: a, type: task, handler: count}
  - {id: b, type: task, handler: count, depends_on: [a]}
  - {id: c, type: task, handler: count, depends_on: [a]}
  - {id: d, type: task, handler: count, depends_on: [b, c]}
`), 201, "diamond")

		b.want(b.do("POST", "/v1/workflows", `{"id":"ch","definition":"chain","input":{"k":1}}`), 201, "start chain")
		orig := b.finished("ch")
		re := b.rerun("ch", `{"from":"b"}`)
		again := b.finished(re)
		if again.Status != workflow.StatusCompleted || again.Definition != "chain" || again.DefinitionRevision != orig.DefinitionRevision || string(again.Input) != `{"k":1}` {
			t.Fatalf("re-run of the chain: %s of %s rev %d, input %s", again.Status, again.Definition, again.DefinitionRevision, again.Input)
		}
		if got := b.calls("ch/a", "ch/b", "ch/c", re+"/a", re+"/b", re+"/c"); !equalCounts(got, map[string]int{"ch/a": 1, "ch/b": 1, "ch/c": 1, re + "/a": 0, re + "/b": 1, re + "/c": 1}) {
			t.Errorf("calls after the chain's re-run from b: %v", got)
		}
		sameRecord(t, orig, again, "a")
		if in := again.State.Steps["b"].Output; !strings.Contains(string(in), `"from_a":1`) {
			t.Errorf("b of the re-run rendered %s, want the kept output of a in it", in)
		}
		h, err := b.s.Store().History(t.Context(), re, 0, 1)
		if err != nil || len(h) == 0 || h[0].Cause != `re-run of ch from step "b"` {
			t.Errorf("the re-run's first version: %+v, %v", h, err)
		}

		b.want(b.do("POST", "/v1/workflows", `{"id":"di","definition":"diamond"}`), 201, "start diamond")
		dorig := b.finished("di")
		fromB := b.rerun("di", `{"from":"b"}`)
		dAgain := b.finished(fromB)
		fromA := b.rerun("di", `{"from":"a", "id":"di-all"}`)
		if fromA != "di-all" {
			t.Errorf("a re-run given an id got %q", fromA)
		}
		b.finished(fromA)
		want := map[string]int{fromB + "/a": 0, fromB + "/b": 1, fromB + "/c": 0, fromB + "/d": 1,
			fromA + "/a": 1, fromA + "/b": 1, fromA + "/c": 1, fromA + "/d": 1}
		if got := b.calls(fromB+"/a", fromB+"/b", fromB+"/c", fromB+"/d", fromA+"/a", fromA+"/b", fromA+"/c", fromA+"/d"); !equalCounts(got, want) {
			t.Errorf("calls of the diamond's re-runs: %v, want %v", got, want)
		}
		sameRecord(t, dorig, dAgain, "a")
		sameRecord(t, dorig, dAgain, "c")

		// The links, both ways: the original lists its re-runs, newest
		// first, and ?rerun_of finds them.
		var got struct {
			Reruns  []string `json:"reruns"`
			RerunOf string   `json:"rerun_of"`
		}
		r := b.want(b.do("GET", "/v1/workflows/di", ""), 200, "GET the original")
		_ = json.Unmarshal([]byte(r.body), &got)
		if !slices.Equal(got.Reruns, []string{fromA, fromB}) || got.RerunOf != "" {
			t.Errorf("the original lists re-runs %v (rerun_of %q), want [%s %s]", got.Reruns, got.RerunOf, fromA, fromB)
		}
		r = b.want(b.do("GET", "/v1/workflows?rerun_of=di", ""), 200, "list the re-runs")
		var page struct {
			Workflows []struct {
				ID      string `json:"id"`
				RerunOf string `json:"rerun_of"`
			} `json:"workflows"`
		}
		_ = json.Unmarshal([]byte(r.body), &page)
		if len(page.Workflows) != 2 || page.Workflows[0].ID != fromA || page.Workflows[1].RerunOf != "di" {
			t.Errorf("?rerun_of=di: %s", r.body)
		}
		b.want(b.do("GET", "/v1/workflows?rerun_of=a%20b", ""), 400, "?rerun_of with a malformed id")
		// A re-run can be re-run; the original can be deleted, and its
		// re-runs stay, still naming it.
		third := b.rerun(fromB, `{"from":"d"}`)
		b.finished(third)
		b.want(b.do("DELETE", "/v1/workflows/di", ""), 204, "delete the original")
		r = b.want(b.do("GET", "/v1/workflows/"+fromB, ""), 200, "GET a re-run of a deleted original")
		got.Reruns, got.RerunOf = nil, ""
		_ = json.Unmarshal([]byte(r.body), &got)
		if got.RerunOf != "di" || !slices.Equal(got.Reruns, []string{third}) {
			t.Errorf("after the original's delete: rerun_of %q, reruns %v", got.RerunOf, got.Reruns)
		}
		b.rerun(fromB, `{"from":"b"}`)
	})
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A foreach step re-run runs all its items again, and what follows it; a
// re-run from a step after it keeps its output without running an item.
// A step skipped by its `when` stays skipped; a failed one runs again.
func TestRerunForeachAndSkipped(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		b := newRerunBundle(t, db)
		b.want(b.do("PUT", "/v1/definitions/fan", `name: fan
steps:
  - {id: each, type: task, handler: count, foreach: .input.items, input: '{{ .item }}'}
  - {id: never, type: task, handler: count, when: 'false'}
  - {id: sum, type: task, handler: count, depends_on: [each], input: '{{ .steps.each.output }}'}
`), 201, "fan")
		b.want(b.do("POST", "/v1/workflows", `{"id":"f1","definition":"fan","input":{"items":["x","y","z"]}}`), 201, "start")
		orig := b.finished("f1")
		if orig.Status != workflow.StatusCompleted || orig.State.Steps["never"].Status != workflow.StepSkipped {
			t.Fatalf("f1: %s, steps %v", orig.Status, orig.State.Steps)
		}
		items := b.rerun("f1", `{"from":"each"}`)
		again := b.finished(items)
		after := b.rerun("f1", `{"from":"sum"}`)
		kept := b.finished(after)
		want := map[string]int{items + "/each/0": 1, items + "/each/1": 1, items + "/each/2": 1, items + "/sum": 1,
			after + "/each/0": 0, after + "/each/1": 0, after + "/each/2": 0, after + "/sum": 1, items + "/never": 0}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		if got := b.calls(keys...); !equalCounts(got, want) {
			t.Errorf("calls: %v, want %v", got, want)
		}
		if again.Status != workflow.StatusCompleted || kept.Status != workflow.StatusCompleted {
			t.Fatalf("re-runs ended %s and %s", again.Status, kept.Status)
		}
		sameRecord(t, orig, kept, "each")
		sameRecord(t, orig, kept, "never")
		var out []map[string]any
		if err := json.Unmarshal(again.State.Steps["each"].Output, &out); err != nil || len(out) != 3 || out[2]["in"] != "z" {
			t.Errorf("the items re-run gave the output %s", again.State.Steps["each"].Output)
		}
	})
}

// The errors of a re-run, each with its status code and a message that
// says what to do.
func TestRerunErrors(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		b := newRerunBundle(t, db)
		b.want(b.do("PUT", "/v1/definitions/pair", `name: pair
steps:
  - {id: first, type: task, handler: count}
  - {id: second, type: task, handler: count, depends_on: [first]}
`), 201, "pair")
		b.want(b.do("PUT", "/v1/definitions/hold", `name: hold
steps:
  - {id: gate, type: wait}
`), 201, "hold")
		b.want(b.do("POST", "/v1/workflows", `{"id":"p1","definition":"pair"}`), 201, "start")
		b.finished("p1")
		b.want(b.do("POST", "/v1/workflows", `{"id":"h1","definition":"hold"}`), 201, "start a waiting one")
		b.want(b.do("POST", "/v1/workflows", `{"id":"free"}`), 201, "a free-form one")

		for _, c := range []struct {
			id, body string
			status   int
			msg      string
		}{
			{"nope", `{"from":"first"}`, 404, `workflow \"nope\"`},
			{"p1", `{"from":"third"}`, 400, `definition pair has no step \"third\" (its steps: first, second)`},
			{"p1", `{"from_seq":2}`, 400, `give \"from\", the step to re-run from (one of first, second)`},
			{"p1", `{"from":"first","from_seq":2}`, 400, `not both`},
			{"p1", `{}`, 400, `give \"from\"`},
			{"p1", ``, 400, `request body is empty`},
			{"p1", `{"from":"first","extra":1}`, 400, `extra`},
			{"p1", `{"from_seq":-1}`, 400, `1 or more`},
			{"p1", `{"from":"first","id":"p1"}`, 409, `p1`},
			{"p1", `{"from":"first","id":"a b"}`, 400, ``},
			{"h1", `{"from":"gate"}`, 409, `workflow h1 is RUNNING: only a finished workflow (COMPLETED, FAILED, CANCELLED or TIMED_OUT) can be re-run`},
			{"free", `{"from":"x"}`, 409, `workflow free is free-form: it has no definition to run its steps again`},
		} {
			r := b.do("POST", "/v1/workflows/"+c.id+"/rerun", c.body)
			if r.status != c.status || !strings.Contains(r.body, c.msg) || !strings.Contains(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("rerun of %s with %s: %d %s, want %d with %q", c.id, c.body, r.status, r.body, c.status, c.msg)
			}
		}
		b.want(b.do("PUT", "/v1/definitions/sw-set", `document: {dsl: '1.0.0', namespace: test, name: sw-set, version: '1.0.0'}
do:
  - only:
      set: {a: 1}
`), 201, "a Serverless Workflow document")
		b.want(b.do("POST", "/v1/workflows", `{"id":"sw1","definition":"sw-set"}`), 201, "start it")
		b.finished("sw1")
		r := b.do("POST", "/v1/workflows/sw1/rerun", `{"from":"only"}`)
		if r.status != 409 || !strings.Contains(r.body, "workflow sw1 runs a Serverless Workflow document, which has no steps to re-run from") {
			t.Errorf("rerun of a Serverless Workflow instance: %d %s", r.status, r.body)
		}
		// A cancelled original can be re-run; once its definition is
		// deleted, its revision is gone and it cannot.
		b.want(b.do("POST", "/v1/workflows/h1/cancel", ""), 200, "cancel h1")
		re := b.rerun("h1", `{"from":"gate"}`)
		b.want(b.do("POST", "/v1/workflows/"+re+"/cancel", ""), 200, "cancel the re-run")
		b.want(b.do("DELETE", "/v1/definitions/hold", ""), 204, "delete the definition")
		r = b.do("POST", "/v1/workflows/h1/rerun", `{"from":"gate"}`)
		if r.status != 409 || !strings.Contains(r.body, `definition \"hold\" revision 1 no longer exists`) {
			t.Errorf("rerun of an instance whose revision was deleted: %d %s", r.status, r.body)
		}
	})
}

// A code workflow re-run from a seq keeps the journal entries before it:
// the Go SDK replays them, and runs the steps from that seq again.
func TestRerunCodeWorkflowFromSeq(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		s, err := server.New(t.Context(), server.Config{DB: db, Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		var mu sync.Mutex
		effects := map[string]int{}
		step := func(wf *worker.WorkflowContext, name string, v int) (int, error) {
			return worker.Step(wf, name, func(ctx context.Context) (int, error) {
				mu.Lock()
				effects[worker.IdempotencyKey(ctx)]++
				mu.Unlock()
				return v, nil
			})
		}
		fn := worker.Func(func(wf *worker.WorkflowContext, in struct{ N int }) (int, error) {
			one, err := step(wf, "one", in.N)
			if err != nil {
				return 0, err
			}
			two, err := step(wf, "two", one*10)
			if err != nil {
				return 0, err
			}
			three, err := step(wf, "three", two+1)
			return three, err
		})
		if err := s.RegisterWorkflow(t.Context(), "calc", worker.Workflow{Run: fn}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		b := &rerunBundle{t: t, s: s, hit: map[string]int{}}
		b.want(b.do("POST", "/v1/workflows", `{"id":"c1","definition":"calc","input":{"N":2}}`), 201, "start")
		orig := b.finished("c1")
		if orig.Status != workflow.StatusCompleted || string(orig.Output) != `21` {
			t.Fatalf("c1: %s, output %s", orig.Status, orig.Output)
		}
		if seq := string(orig.State.Steps["two"].Extra["seq"]); seq != "2" {
			t.Fatalf("two was recorded with seq %s", seq)
		}
		re := b.rerun("c1", `{"from_seq":2}`)
		again := b.finished(re)
		if again.Status != workflow.StatusCompleted || string(again.Output) != `21` {
			t.Fatalf("the re-run: %s, output %s", again.Status, again.Output)
		}
		mu.Lock()
		got := map[string]int{"one": effects[re+"/one"], "two": effects[re+"/two"], "three": effects[re+"/three"]}
		mu.Unlock()
		if !equalCounts(got, map[string]int{"one": 0, "two": 1, "three": 1}) {
			t.Errorf("steps run by the re-run from seq 2: %v, want two and three only", got)
		}
		sameRecord(t, orig, again, "one")
		for name, seq := range map[string]string{"one": "1", "two": "2", "three": "3"} {
			if got := string(again.State.Steps[name].Extra["seq"]); got != seq {
				t.Errorf("the re-run recorded %s with seq %s, want %s", name, got, seq)
			}
		}
		r := b.do("POST", "/v1/workflows/c1/rerun", `{"from":"two"}`)
		if r.status != 400 || !strings.Contains(r.body, `is a code workflow: give \"from_seq\"`) {
			t.Errorf("rerun of a code workflow from a step name: %d %s", r.status, r.body)
		}
	})
}

// A re-run over its definition's concurrency limit waits QUEUED with the
// records it keeps, and starts from them when a slot frees.
func TestRerunQueuedForASlot(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		b := newRerunBundle(t, db)
		b.want(b.do("PUT", "/v1/definitions/one", `name: one
concurrency: {limit: 1}
steps:
  - {id: a, type: task, handler: count}
  - {id: gate, type: wait, depends_on: [a]}
  - {id: z, type: task, handler: count, depends_on: [gate]}
`), 201, "one at a time")
		b.want(b.do("POST", "/v1/workflows", `{"id":"q1","definition":"one"}`), 201, "start q1")
		deadline := time.Now().Add(10 * time.Second)
		for {
			inst, err := b.s.Store().Get(t.Context(), "q1")
			if err != nil {
				t.Fatal(err)
			}
			if inst.State.Steps["gate"].Status == workflow.StepWaiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("q1 never waited at the gate: %v", inst.State.Steps)
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.want(b.do("POST", "/v1/workflows/q1/cancel", ""), 200, "cancel q1")
		b.want(b.do("POST", "/v1/workflows", `{"id":"holder","definition":"one"}`), 201, "a start that takes the slot")
		re := b.rerun("q1", `{"from":"gate"}`)
		queued, err := b.s.Store().Get(t.Context(), re)
		if err != nil {
			t.Fatal(err)
		}
		if queued.Status != workflow.StatusQueued || queued.State.Steps["a"].Status != workflow.StepCompleted || queued.State.Steps["gate"].Status != workflow.StepPending {
			t.Fatalf("the re-run over the limit: %s, steps a %+v, gate %+v", queued.Status, queued.State.Steps["a"], queued.State.Steps["gate"])
		}
		b.want(b.do("POST", "/v1/workflows/holder/cancel", ""), 200, "free the slot")
		for {
			inst, err := b.s.Store().Get(t.Context(), re)
			if err != nil {
				t.Fatal(err)
			}
			if inst.State.Steps["gate"].Status == workflow.StepWaiting {
				if inst.Status != workflow.StatusRunning || inst.State.Steps["a"].Status != workflow.StepCompleted {
					t.Errorf("the promoted re-run: %s, a %+v", inst.Status, inst.State.Steps["a"])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the re-run never started from its kept records: %s, %v", inst.Status, inst.State.Steps)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := b.calls("q1/a", re+"/a"); got["q1/a"] != 1 || got[re+"/a"] != 0 {
			t.Errorf("calls of a: %v, want once, by q1", got)
		}
		b.want(b.do("POST", "/v1/workflows/"+re+"/cancel", ""), 200, "cancel the re-run")
	})
}
