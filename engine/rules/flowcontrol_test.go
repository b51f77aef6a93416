package rules

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A task carries its instance's priority and its step's keys, rendered
// when it is created: per item for a foreach step.
func TestTaskFlowRendered(t *testing.T) {
	c := compileDef(t, `name: f
steps:
  - id: each
    type: task
    handler: h
    foreach: .input.items
    concurrency: {key: "tenant-{{ .item.t }}", limit: 2}
    rate_limit: {key: "api-{{ .input.region }}", per_second: 1.5}
  - {id: plain, type: task, handler: h}
`)
	inst := &workflow.Instance{ID: "wf-1", Input: json.RawMessage(`{"region": "eu", "items": [{"t": "a"}, {"t": "b"}]}`),
		State: c.Def.InitialState(), Priority: 5}
	ch, err := testEnv().Start(c, inst, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workflow.TaskFlow{}
	for _, tk := range ch.Insert {
		got[TaskKey(tk.StepID, tk.Iteration)] = tk.Flow
	}
	want := map[string]workflow.TaskFlow{
		"each#1": {Priority: 5, ConcurrencyKey: "tenant-a", ConcurrencyLimit: 2, RateKey: "api-eu", RatePerSecond: 1.5, RateBurst: 2},
		"each#2": {Priority: 5, ConcurrencyKey: "tenant-b", ConcurrencyLimit: 2, RateKey: "api-eu", RatePerSecond: 1.5, RateBurst: 2},
		"plain":  {Priority: 5},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("task %s: flow %+v, want %+v", k, got[k], w)
		}
	}
	if !ch.Notify {
		t.Error("the start queued tasks without Notify")
	}
}

// A key that does not render, or renders too long, fails the step like
// any template; an instance without a priority gives its tasks the
// default.
func TestTaskFlowKeyProblems(t *testing.T) {
	def := `name: f
steps:
  - {id: a, type: task, handler: h, concurrency: {key: "{{ .input.k }}", limit: 1}}
`
	for _, c := range []struct{ input, want string }{
		{`{}`, "concurrency.key: "},
		{`{"k": "` + strings.Repeat("x", workflow.MaxFlowKeyLength+1) + `"}`, "concurrency.key: the rendered key is longer than 256 characters"},
	} {
		cd := compileDef(t, def)
		ch, err := testEnv().Start(cd, &workflow.Instance{ID: "wf-1", Input: json.RawMessage(c.input), State: cd.Def.InitialState()}, t0)
		if err != nil {
			t.Fatal(err)
		}
		st := ch.State.Steps["a"]
		if st.Status != workflow.StepFailed || !strings.HasPrefix(st.Error, c.want) {
			t.Errorf("input %.40s: step %s (%q), want FAILED with %q", c.input, st.Status, st.Error, c.want)
		}
	}
	w := started(t, def, `{"k": "x"}`)
	if tk := w.tasks["a"]; tk == nil || tk.Flow.Priority != workflow.DefaultPriority || tk.Flow.ConcurrencyKey != "x" {
		t.Errorf("task %+v, want priority 3 and key x", tk)
	}
}

// A slot a key frees makes the change wake the workers; a task under flow
// control is never leased with its predecessor's completion.
func TestTaskFlowWakesAndLeaseNext(t *testing.T) {
	ch := Change{Update: []TaskUpdate{{Task: store.Task{Status: store.TaskDone, Flow: workflow.TaskFlow{ConcurrencyKey: "k", ConcurrencyLimit: 1}}}}}
	if !ch.claimable() {
		t.Error("a keyed task that is done does not wake the workers")
	}
	ch = Change{Update: []TaskUpdate{{Task: store.Task{Status: store.TaskLeased, Flow: workflow.TaskFlow{ConcurrencyKey: "k", ConcurrencyLimit: 1}}}}}
	if ch.claimable() {
		t.Error("a heartbeat of a keyed task wakes the workers")
	}
	w := started(t, `name: f
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a], concurrency: {key: k, limit: 1}}
`, `{}`)
	a := w.tasks["a"]
	w.env.lease(a, "w", w.now, time.Minute)
	next, err := w.env.CompleteTask(w.c, w.inst, a, a.Lease, json.RawMessage(`{}`), NextLease{Queues: []string{"h"}, Owner: "w", Lease: time.Minute}, w.now)
	if err != nil {
		t.Fatal(err)
	}
	if next.Next != nil {
		t.Errorf("the keyed step b was leased with a's completion: %+v", next.Next)
	}
}
