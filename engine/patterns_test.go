package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The workflow patterns of docs/patterns.md that flowd supports, each run
// end to end: one subtest per pattern, named after it, on both stores.

// rendezvous makes the handlers of steps meet: each call waits until n
// calls have arrived, so a step only completes if the others ran at the
// same time (a parallel split that ran its branches one after the other
// would never get there and fail).
type rendezvous struct {
	mu      sync.Mutex
	arrived map[string]int
	all     map[string]chan struct{}
	n       int
}

func (r *rendezvous) handler(ctx context.Context, t engine.Task) (json.RawMessage, error) {
	r.mu.Lock()
	r.arrived[t.WorkflowID]++
	ch := r.all[t.WorkflowID]
	if ch == nil {
		ch = make(chan struct{})
		r.all[t.WorkflowID] = ch
	}
	if r.arrived[t.WorkflowID] == r.n {
		close(ch)
	}
	r.mu.Unlock()
	select {
	case <-ch:
		return t.Input, nil
	case <-time.After(20 * time.Second):
		return nil, engine.Permanent(errors.New("the other branches never ran at the same time"))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestWorkflowPatterns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		meet := &rendezvous{arrived: map[string]int{}, all: map[string]chan struct{}{}, n: 2}
		release := make(chan struct{})
		n := newNode(t, b, b.newDB(t), nodeOpts{workers: 6, handlers: map[string]engine.Handler{
			"echo": echo,
			"meet": meet.handler,
			"dec": func(_ context.Context, t engine.Task) (json.RawMessage, error) {
				var v int
				if err := json.Unmarshal(t.Input, &v); err != nil {
					return nil, engine.Permanent(err)
				}
				return json.RawMessage(strconv.Itoa(v - 1)), nil
			},
			"block": func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return json.RawMessage(`"late"`), nil
			},
		}})
		t.Cleanup(func() { close(release) })
		ctx := context.Background()
		done := func(id string) *workflow.Instance {
			t.Helper()
			return n.waitStatus(id, workflow.StatusCompleted, 30*time.Second)
		}
		status := func(inst *workflow.Instance, want map[string]workflow.StepStatus) {
			t.Helper()
			for step, s := range want {
				if got := inst.State.Steps[step].Status; got != s {
					t.Errorf("%s: step %s is %s, want %s", inst.ID, step, got, s)
				}
			}
		}
		complete := func(id, step, output string) (*workflow.Instance, error) {
			return n.eng.CompleteStep(ctx, engine.CompleteStepParams{ID: id, Step: step, Output: json.RawMessage(output)})
		}
		waitStep := func(id, step string, want workflow.StepStatus) {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				inst, err := n.st.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if inst.State.Steps[step].Status == want {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: step %s is %s, want %s", id, step, inst.State.Steps[step].Status, want)
				}
			}
		}

		t.Run("WCP-1 Sequence", func(t *testing.T) {
			n.define(`
name: wcp1
steps:
  - {id: a, type: task, handler: echo, input: "{{ .input.v }}"}
  - {id: b, type: task, handler: echo, depends_on: [a], input: {after: "{{ .steps.a.output }}"}}
`)
			n.start("wcp1", "wcp1", `{"v": 7}`)
			if got := output(t, done("wcp1"), "b"); got != `{"after":7}` {
				t.Errorf("b = %s", got)
			}
		})

		t.Run("WCP-2 Parallel split and WCP-3 Synchronization", func(t *testing.T) {
			n.define(`
name: wcp2
steps:
  - {id: a, type: task, handler: echo, input: 1}
  - {id: b, type: task, handler: meet, depends_on: [a], input: "b"}
  - {id: c, type: task, handler: meet, depends_on: [a], input: "c"}
  - {id: d, type: task, handler: echo, depends_on: [b, c], input: ["{{ .steps.b.output }}", "{{ .steps.c.output }}"]}
`)
			n.start("wcp2", "wcp2", `{}`)
			if got := output(t, done("wcp2"), "d"); got != `["b","c"]` {
				t.Errorf("d = %s", got)
			}
		})

		t.Run("WCP-4 Exclusive choice and WCP-5 Simple merge", func(t *testing.T) {
			n.define(`
name: wcp4
steps:
  - {id: big, type: task, handler: echo, when: ".input.amount > 100", input: "review"}
  - {id: small, type: task, handler: echo, when: ".input.amount <= 100", input: "auto"}
  - {id: merge, type: task, handler: echo, depends_on: [big, small], join: any, input: ["{{ .steps.big.output }}", "{{ .steps.small.output }}"]}
`)
			n.start("wcp4", "wcp4-big", `{"amount": 150}`)
			n.start("wcp4", "wcp4-small", `{"amount": 20}`)
			big, small := done("wcp4-big"), done("wcp4-small")
			status(big, map[string]workflow.StepStatus{"big": workflow.StepCompleted, "small": workflow.StepSkipped, "merge": workflow.StepCompleted})
			status(small, map[string]workflow.StepStatus{"big": workflow.StepSkipped, "small": workflow.StepCompleted, "merge": workflow.StepCompleted})
			if got := output(t, big, "merge"); got != `["review",null]` {
				t.Errorf("merge after big = %s", got)
			}
			if got := output(t, small, "merge"); got != `[null,"auto"]` {
				t.Errorf("merge after small = %s", got)
			}
		})

		t.Run("WCP-6 Multi-choice and WCP-7 Structured synchronizing merge", func(t *testing.T) {
			n.define(`
name: wcp6
steps:
  - {id: email, type: task, handler: echo, when: ".input.channels | index(\"email\") != null", input: "mailed"}
  - {id: sms, type: task, handler: echo, when: ".input.channels | index(\"sms\") != null", input: "texted"}
  - {id: push, type: task, handler: echo, when: ".input.channels | index(\"push\") != null", input: "pushed"}
  - {id: report, type: task, handler: echo, depends_on: [email, sms, push], join: any,
     input: ["{{ .steps.email.output }}", "{{ .steps.sms.output }}", "{{ .steps.push.output }}"]}
`)
			n.start("wcp6", "wcp6", `{"channels": ["email", "push"]}`)
			inst := done("wcp6")
			status(inst, map[string]workflow.StepStatus{"email": workflow.StepCompleted, "sms": workflow.StepSkipped, "push": workflow.StepCompleted})
			if got := output(t, inst, "report"); got != `["mailed",null,"pushed"]` {
				t.Errorf("report = %s (it must wait for every branch that ran)", got)
			}
		})

		t.Run("WCP-29 Cancelling discriminator", func(t *testing.T) {
			n.define(`
name: wcp29
steps:
  - {id: a, type: wait}
  - {id: b, type: wait}
  - {id: c, type: wait}
  - {id: first, type: task, handler: echo, depends_on: [a, b, c], join: first, input: ["{{ .steps.a.output }}", "{{ .steps.b.output }}"]}
`)
			n.start("wcp29", "wcp29", `{}`)
			if _, err := complete("wcp29", "b", `"b won"`); err != nil {
				t.Fatal(err)
			}
			inst := done("wcp29")
			status(inst, map[string]workflow.StepStatus{"a": workflow.StepSkipped, "b": workflow.StepCompleted, "c": workflow.StepSkipped})
			if got := output(t, inst, "first"); got != `[null,"b won"]` {
				t.Errorf("first = %s", got)
			}
			if _, err := complete("wcp29", "a", `"late"`); err == nil {
				t.Error("a withdrawn branch took a completion")
			}
		})

		t.Run("WCP-11 Implicit termination", func(t *testing.T) {
			n.define(`
name: wcp11
steps:
  - {id: a, type: task, handler: echo, input: 1}
  - {id: never, type: task, handler: echo, when: "false", input: 2}
  - {id: after-never, type: task, handler: echo, depends_on: [never], input: 3}
`)
			n.start("wcp11", "wcp11", `{}`)
			inst := done("wcp11")
			status(inst, map[string]workflow.StepStatus{"a": workflow.StepCompleted, "never": workflow.StepSkipped, "after-never": workflow.StepSkipped})
			if string(inst.Output) != `{"a":1}` {
				t.Errorf("output = %s, want the completed final steps' outputs", inst.Output)
			}
		})

		t.Run("WCP-13 Multiple instances with a priori design-time knowledge", func(t *testing.T) {
			n.define(`
name: wcp13
steps:
  - {id: regions, type: task, handler: echo, foreach: '["eu", "us", "ap"]', input: {region: "{{ .item }}", n: "{{ .index }}"}}
`)
			n.start("wcp13", "wcp13", `{}`)
			if got := output(t, done("wcp13"), "regions"); got != `[{"n":0,"region":"eu"},{"n":1,"region":"us"},{"n":2,"region":"ap"}]` {
				t.Errorf("regions = %s", got)
			}
		})

		t.Run("WCP-14 Multiple instances with a priori run-time knowledge", func(t *testing.T) {
			n.define(`
name: wcp14
steps:
  - {id: each, type: task, handler: echo, foreach: .input.items, max_concurrency: 2, input: "{{ .item }}"}
`)
			items := make([]int, 25)
			for i := range items {
				items[i] = i * i
			}
			in, _ := json.Marshal(map[string]any{"items": items})
			n.start("wcp14", "wcp14", string(in))
			want, _ := json.Marshal(items)
			inst := done("wcp14")
			if got := output(t, inst, "each"); got != string(want) {
				t.Errorf("each = %s, want %s", got, want)
			}
			n.checkHistory(inst)
		})

		t.Run("WCP-16 Deferred choice", func(t *testing.T) {
			for _, tc := range []struct{ id, duration, winner, loser string }{
				{"wcp16-approved", "1h", "approve", "timer"},
				{"wcp16-timed-out", "50ms", "timer", "approve"},
			} {
				def := fmt.Sprintf(`
name: %s
steps:
  - {id: approve, type: wait}
  - {id: timer, type: sleep, duration: %s}
  - {id: decide, type: task, handler: echo, depends_on: [approve, timer], join: first,
     input: {approved: "{{ .steps.approve.output }}"}}
`, tc.id, tc.duration)
				n.define(def)
				n.start(tc.id, tc.id, `{}`)
				if tc.winner == "approve" {
					waitStep(tc.id, "approve", workflow.StepWaiting)
					if _, err := complete(tc.id, "approve", `true`); err != nil {
						t.Fatal(err)
					}
				}
				inst := done(tc.id)
				status(inst, map[string]workflow.StepStatus{tc.winner: workflow.StepCompleted, tc.loser: workflow.StepSkipped})
			}
		})

		t.Run("WCP-19 Cancel activity", func(t *testing.T) {
			n.define(`
name: wcp19
steps:
  - {id: work, type: task, handler: block}
  - {id: stop, type: wait}
  - {id: after, type: task, handler: echo, depends_on: [work, stop], join: first, input: "stopped"}
`)
			n.start("wcp19", "wcp19", `{}`)
			waitStep("wcp19", "work", workflow.StepRunning)
			if _, err := complete("wcp19", "stop", `null`); err != nil {
				t.Fatal(err)
			}
			inst := done("wcp19")
			status(inst, map[string]workflow.StepStatus{"work": workflow.StepSkipped, "after": workflow.StepCompleted})
			tasks, err := n.st.TasksOfInstance(ctx, "wcp19")
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range tasks {
				if task.StepID == "work" && task.Status != store.TaskCancelled {
					t.Errorf("the cancelled activity's task is %s", task.Status)
				}
			}
		})

		t.Run("WCP-20 Cancel case", func(t *testing.T) {
			n.define(`
name: wcp20
steps:
  - {id: work, type: task, handler: block}
  - {id: approve, type: wait}
`)
			n.start("wcp20", "wcp20", `{}`)
			waitStep("wcp20", "work", workflow.StepRunning)
			inst, err := n.eng.Action(ctx, "wcp20", "cancel")
			if err != nil {
				t.Fatal(err)
			}
			status(inst, map[string]workflow.StepStatus{"work": workflow.StepCancelled, "approve": workflow.StepCancelled})
			if inst.Status != workflow.StatusCancelled {
				t.Errorf("status %s", inst.Status)
			}
		})

		t.Run("WCP-22 Recursion", func(t *testing.T) {
			n.define(`
name: countdown
steps:
  - {id: dec, type: task, handler: dec, input: "{{ .input.n }}"}
  - {id: again, type: workflow, definition: countdown, depends_on: [dec], when: ".steps.dec.output > 0",
     input: {n: "{{ .steps.dec.output }}"}}
output: {n: "{{ .input.n }}", below: "{{ .steps.again.output }}"}
`)
			n.start("countdown", "wcp22", `{"n": 3}`)
			inst := done("wcp22")
			if string(inst.Output) != `{"below":{"below":{"below":null,"n":1},"n":2},"n":3}` {
				t.Errorf("output = %s", inst.Output)
			}
		})

		t.Run("WCP-24 Persistent trigger", func(t *testing.T) {
			n.define(`
name: wcp24
steps:
  - {id: gate, type: wait}
  - {id: paid, type: wait, depends_on: [gate], event: payment.received, key: "{{ .input.order }}"}
`)
			n.start("wcp24", "wcp24", `{"order": "o-24"}`)
			// Published while nothing waits for it: kept, and taken when
			// the step starts waiting.
			if _, err := n.eng.PublishEvent(ctx, "payment.received", "o-24", json.RawMessage(`{"amount": 5}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := complete("wcp24", "gate", `null`); err != nil {
				t.Fatal(err)
			}
			if got := output(t, done("wcp24"), "paid"); got != `{"amount":5}` {
				t.Errorf("paid = %s", got)
			}
		})
	})
}
