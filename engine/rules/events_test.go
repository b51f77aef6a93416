package rules

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const paymentDef = `
name: payment
timeout: 1h
steps:
  - {id: order, type: task, handler: h}
  - {id: paid, type: wait, event: payment, key: "order-{{ .input.id }}", depends_on: [order]}
  - {id: ship, type: task, handler: h, input: "{{ .steps.paid.output }}", depends_on: [paid]}
`

// paymentWaiting is an instance of paymentDef whose wait step has started
// waiting.
func paymentWaiting(t *testing.T, input string) *world {
	t.Helper()
	w := started(t, paymentDef, input)
	w.deliver("order")
	w.complete("order", `null`)
	return w
}

func TestWaitStepWithAnEventQueuesATaskNoWorkerClaims(t *testing.T) {
	w := paymentWaiting(t, `{"id": 17}`)
	w.wantSteps(map[string]workflow.StepStatus{"paid": workflow.StepWaiting, "ship": workflow.StepPending})
	task := w.tasks["paid"]
	if task == nil || task.Queue != "flowd:event/payment/order-17" || task.Status != store.TaskQueued || task.MaxAttempts != 1 {
		t.Fatalf("the waiting step's task = %+v, want one QUEUED in flowd:event/payment/order-17", task)
	}
	if got := string(w.step("paid").Extra["event"]); got != `{"name":"payment","key":"order-17"}` {
		t.Errorf("state.steps.paid.event = %s", got)
	}
	// Only the event task is queued by the completion: nobody to wake.
	w2 := started(t, paymentDef, `{"id": 1}`)
	w2.deliver("order")
	task2 := w2.tasks["order"]
	ch, err := w2.env.CompleteTask(w2.c, w2.inst, task2, task2.Lease, json.RawMessage(`null`), NextLease{}, w2.now)
	if err != nil || ch.Notify || len(ch.Insert) != 1 {
		t.Errorf("completion that starts the wait: notify %v, inserts %d, %v; want no wake-up", ch.Notify, len(ch.Insert), err)
	}
}

func TestEventWithoutKeyWaitsOnTheEmptyKey(t *testing.T) {
	w := started(t, `
name: e
steps:
  - {id: w, type: wait, event: "a.b:c-d_e"}
`, `{}`)
	if q := w.tasks["w"].Queue; q != "flowd:event/a.b:c-d_e/" {
		t.Errorf("queue = %q", q)
	}
}

func TestKeyThatDoesNotRenderFailsTheStep(t *testing.T) {
	for _, c := range []struct{ input, want string }{
		{`{}`, "key: "},
		{`{"k": "` + strings.Repeat("x", workflow.MaxEventKeyLength+1) + `"}`, "key: the rendered key is longer than 256 characters"},
	} {
		w := started(t, `
name: e
steps:
  - {id: a, type: task, handler: h}
  - {id: w, type: wait, event: payment, key: "{{ .input.k }}", depends_on: [a]}
`, c.input)
		w.deliver("a")
		w.complete("a", `null`)
		w.wantStatus(workflow.StatusFailed)
		if st := w.step("w"); st.Status != workflow.StepFailed || !strings.HasPrefix(st.Error, c.want) || w.tasks["w"] != nil {
			t.Errorf("input %.20s: step w = %+v, task %+v; want FAILED with %q and no task", c.input, st, w.tasks["w"], c.want)
		}
	}
}

func TestEventCompletesTheWaitingStepOnce(t *testing.T) {
	w := paymentWaiting(t, `{"id": 17}`)
	w.inst.CreatedAt = t0
	ev := Event{ID: "ev-1", Name: "payment", Key: "order-17", Data: json.RawMessage(`{"amount": 5}`), CreatedAt: t0.Add(time.Second)}
	task := *w.tasks["paid"]
	ch, err := w.env.CompleteByEvent(w.c, w.inst, &task, ev, w.now)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Cause != `event "payment" (ev-1) completed step "paid"` || !ch.Notify {
		t.Errorf("cause %q, notify %v", ch.Cause, ch.Notify)
	}
	if len(ch.Update) != 1 || ch.Update[0].Task.Status != store.TaskDone || ch.Update[0].Guard != store.GuardOf(&task) {
		t.Errorf("task update = %+v, want DONE guarded by the QUEUED row read", ch.Update)
	}
	w.apply(ch)
	w.wantSteps(map[string]workflow.StepStatus{"paid": workflow.StepCompleted, "ship": workflow.StepRunning})
	if string(w.step("paid").Output) != `{"amount": 5}` || string(w.tasks["ship"].Input) != `{"amount":5}` {
		t.Errorf("output %s, ship's input %s", w.step("paid").Output, w.tasks["ship"].Input)
	}
	if got := string(w.step("paid").Extra["event"]); got != `{"name":"payment","key":"order-17","id":"ev-1"}` {
		t.Errorf("state.steps.paid.event = %s", got)
	}
	// The same event again, or another one: the step no longer takes it.
	done := *w.tasks["paid"]
	if _, err := w.env.CompleteByEvent(w.c, w.inst, &done, ev, w.now); !errors.Is(err, ErrEventNotTaken) {
		t.Errorf("second delivery = %v, want ErrEventNotTaken", err)
	}
}

func TestEventNotTaken(t *testing.T) {
	ev := Event{ID: "ev", Name: "payment", Key: "order-17", CreatedAt: t0.Add(time.Second)}
	for _, c := range []struct {
		name  string
		setup func(w *world, task *store.Task, ev *Event)
	}{
		{"another key", func(w *world, task *store.Task, ev *Event) { ev.Key = "order-18" }},
		{"another name", func(w *world, task *store.Task, ev *Event) { ev.Name = "refund" }},
		{"published before the instance", func(w *world, task *store.Task, ev *Event) { w.inst.CreatedAt = ev.CreatedAt.Add(time.Microsecond) }},
		{"instance cancelled", func(w *world, task *store.Task, ev *Event) { w.inst.Status = workflow.StatusCancelled }},
		{"task no longer queued", func(w *world, task *store.Task, ev *Event) { task.Status = store.TaskCancelled }},
		{"step no longer waiting", func(w *world, task *store.Task, ev *Event) { w.step("paid").Status = workflow.StepCancelled }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := paymentWaiting(t, `{"id": 17}`)
			w.inst.CreatedAt = t0
			task, e := *w.tasks["paid"], ev
			c.setup(w, &task, &e)
			if _, err := w.env.CompleteByEvent(w.c, w.inst, &task, e, w.now); !errors.Is(err, ErrEventNotTaken) {
				t.Errorf("CompleteByEvent = %v, want ErrEventNotTaken", err)
			}
		})
	}
}

func TestEventAcceptedWhilePaused(t *testing.T) {
	w := paymentWaiting(t, `{"id": 17}`)
	if _, err := w.act("pause"); err != nil {
		t.Fatal(err)
	}
	task := *w.tasks["paid"]
	ch, err := w.env.CompleteByEvent(w.c, w.inst, &task, Event{ID: "e", Name: "payment", Key: "order-17", CreatedAt: t0}, w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusPaused)
	w.wantSteps(map[string]workflow.StepStatus{"paid": workflow.StepCompleted, "ship": workflow.StepPending})
}

func TestRetryWaitsForTheEventAgainOnTheSameRow(t *testing.T) {
	w := paymentWaiting(t, `{"id": 17}`)
	w.now = t0.Add(2 * time.Hour)
	ch, ok := TimeOut(w.inst, w.now)
	if !ok {
		t.Fatal("no timeout")
	}
	w.apply(ch)
	w.wantSteps(map[string]workflow.StepStatus{"paid": workflow.StepCancelled})
	w.tasks["paid"].Status = store.TaskCancelled // as the store's stop of the instance leaves it
	ch, err := w.act("retry")
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Insert) != 0 || len(ch.Update) != 1 || ch.Notify {
		t.Errorf("retry: %d inserts, %d updates, notify %v; want the row re-queued and nobody woken", len(ch.Insert), len(ch.Update), ch.Notify)
	}
	w.wantSteps(map[string]workflow.StepStatus{"paid": workflow.StepWaiting})
	if task := w.tasks["paid"]; task.Status != store.TaskQueued || task.Queue != "flowd:event/payment/order-17" || !task.RunAt.Equal(w.now) {
		t.Errorf("task after retry = %+v", task)
	}
}

// An event whose data would make the state too large cannot be recorded:
// CompleteByEvent refuses it, and FailByEvent fails the step (and the
// RUNNING instance) with the reason, its task FAILED while still QUEUED.
func TestEventTooLargeFailsTheWaitingStep(t *testing.T) {
	w := paymentWaiting(t, `{"id": 17}`)
	w.env.MaxStateBytes = 600
	task := *w.tasks["paid"]
	ev := Event{ID: "ev-1", Name: "payment", Key: "order-17", Data: json.RawMessage(`"` + strings.Repeat("x", 700) + `"`), CreatedAt: t0}
	prior := w.inst.State.Clone()
	_, err := w.env.CompleteByEvent(w.c, w.inst, &task, ev, w.now)
	var big *workflow.StateTooLargeError
	if !errors.As(err, &big) {
		t.Fatalf("CompleteByEvent with too much data: %v", err)
	}
	w.inst.State, w.inst.Status = prior, workflow.StatusRunning
	reason := EventTooLargeError(ev, big.Size, big.Max)
	ch, err := w.env.FailByEvent(w.c, w.inst, &task, ev, reason, w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	paid := w.step("paid")
	if paid.Status != workflow.StepFailed || paid.Error != reason || !strings.Contains(reason, "more than --max-state-bytes (600)") || !strings.Contains(reason, `event "payment" (ev-1)`) {
		t.Errorf("paid: %+v", paid)
	}
	if got := string(paid.Extra["event"]); got != `{"name":"payment","key":"order-17","id":"ev-1"}` {
		t.Errorf("state.steps.paid.event = %s", got)
	}
	if tk := w.tasks["paid"]; tk.Status != store.TaskFailed || tk.LastError != reason || ch.Update[0].Guard.Status != store.TaskQueued {
		t.Errorf("paid's task %+v, guard %+v", tk, ch.Update[0].Guard)
	}
	if ch.Cause != `event "payment" (ev-1) could not be delivered to step "paid"` || w.step("ship").Status != workflow.StepPending {
		t.Errorf("cause %q, ship %s", ch.Cause, w.step("ship").Status)
	}
	// The step takes nothing more.
	if _, err := w.env.FailByEvent(w.c, w.inst, w.tasks["paid"], ev, reason, w.now); !errors.Is(err, ErrEventNotTaken) {
		t.Errorf("a second failure: %v", err)
	}
}

// swListen is a document whose one task listens for a payment event.
const swListen = `
document: {dsl: '1.0.0', namespace: test, name: l, version: '1.0.0'}
do:
  - wait:
      listen:
        to:
          one:
            with: {type: payment}
`

// A Serverless Workflow's listen task that cannot record its event raises
// a runtime error at the task: without a try/catch the instance faults.
func TestEventTooLargeRaisesAtAServerlessListenTask(t *testing.T) {
	w := swStarted(t, swListen)
	var task *store.Task
	for _, tk := range w.tasks {
		task = tk
	}
	ev := Event{ID: "ev-2", Name: "payment", Data: json.RawMessage(`1`), CreatedAt: t0}
	ch, err := w.env.FailByEvent(w.c, w.inst, task, ev, "too large", w.now)
	if err != nil {
		t.Fatal(err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	rt, err := SWRuntime(w.inst.State)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Fault == nil || rt.Fault.Detail != "too large" || rt.Fault.Instance != "/do/0/wait" {
		t.Errorf("fault %+v", rt.Fault)
	}
}
