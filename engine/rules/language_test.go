package rules

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/sw"
	"github.com/flowd/flowd/workflow"
)

// The rules meet the two definition languages through Language: each test
// here runs one of its operations through a flowd DAG and a Serverless
// Workflow document.

// swCall is a document with one handler call, whose attempt times out
// after 10 seconds, and no try/catch.
const swCall = `
document: {dsl: '1.0.0', namespace: test, name: call, version: '1.0.0'}
do:
  - c:
      call: h
      timeout:
        after: PT10S
`

// dagCall is a flowd definition with one handler step, whose attempt
// times out after 10 seconds, and no retry.
const dagCall = `
name: call
steps:
  - {id: c, type: task, handler: h, timeout: 10s, retry: {max_attempts: 1}}
`

// only returns the world's one active task.
func (w *world) only() *store.Task {
	w.t.Helper()
	var found *store.Task
	for _, tk := range w.tasks {
		if tk.Status.Active() {
			if found != nil {
				w.t.Fatalf("two active tasks: %+v, %+v", found, tk)
			}
			found = tk
		}
	}
	if found == nil {
		w.t.Fatalf("no active task: %+v", w.tasks)
	}
	return found
}

// languages are the worlds of one handler call in each language.
func languages(t *testing.T) map[string]func() *world {
	return map[string]func() *world{
		"flowd":      func() *world { return started(t, dagCall, `{}`) },
		"serverless": func() *world { return swStarted(t, swCall) },
	}
}

// A failed attempt without retry fails the instance in both languages; a
// flowd instance may then be retried, a faulted Serverless Workflow
// cannot (its document's try/catch retries its tasks).
func TestRetryOfAFailedInstanceDependsOnItsLanguage(t *testing.T) {
	for name, start := range languages(t) {
		t.Run(name, func(t *testing.T) {
			w := start()
			task := w.deliver(w.only().StepID)
			ch := w.fail(task.StepID, "boom", true)
			w.wantStatus(workflow.StatusFailed)
			if u := ch.Update[0]; u.Task.Status != store.TaskFailed || u.Guard != store.GuardOf(task) {
				t.Errorf("the failed attempt's update %+v", u)
			}
			_, err := w.act("retry")
			if name == "flowd" {
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				w.wantStatus(workflow.StatusRunning)
				if tk := w.tasks["c"]; tk.Status != store.TaskQueued {
					t.Errorf("the retried task %+v", tk)
				}
				return
			}
			var na *NotAllowedError
			if !errors.As(err, &na) || na.Msg != "cannot retry workflow wf-1: a Serverless Workflow instance that faulted cannot be retried (start a new one; use try/catch with retry in the document to retry its tasks)" {
				t.Fatalf("retry: %v", err)
			}
			rt, err := SWRuntime(w.inst.State)
			if err != nil {
				t.Fatal(err)
			}
			if rt.Fault == nil || rt.Fault.Detail != "boom" || rt.Fault.Type != sw.ErrorTypePrefix+sw.KindRuntime {
				t.Errorf("fault %+v", rt.Fault)
			}
		})
	}
}

// A step of a flowd instance may be completed through the API; a
// Serverless Workflow's tasks are not.
func TestCompletingAStepFromOutsideDependsOnItsLanguage(t *testing.T) {
	for name, start := range languages(t) {
		t.Run(name, func(t *testing.T) {
			w := start()
			task := w.only()
			ch, err := w.env.CompleteStep(w.c, w.inst, ExternalCompletion{Step: task.StepID, Output: json.RawMessage(`1`), Task: task}, w.now)
			if name == "flowd" {
				if err != nil {
					t.Fatal(err)
				}
				w.apply(ch)
				w.wantStatus(workflow.StatusCompleted)
				return
			}
			var na *NotAllowedError
			if !errors.As(err, &na) || na.Msg != "workflow wf-1 runs a Serverless Workflow document: its tasks are completed by their workers, events and timers, not through the API" {
				t.Fatalf("completing a step from outside: %v", err)
			}
		})
	}
}

// Each language stores its step's (its item's) timeout on the task it
// inserts, so that a claim bounds the attempt by it without reading the
// definition.
func TestTasksCarryTheirTimeoutInEachLanguage(t *testing.T) {
	for name, start := range languages(t) {
		t.Run(name, func(t *testing.T) {
			w := start()
			task := w.only()
			if task.AttemptTimeout != 10*time.Second {
				t.Fatalf("the task's attempt timeout is %v, want the 10s timeout", task.AttemptTimeout)
			}
			u := w.deliver(task.StepID)
			if !u.AttemptDeadline.Equal(t0.Add(10*time.Second)) || !u.LeaseUntil.Equal(u.AttemptDeadline) {
				t.Errorf("the attempt is bounded by %v, its lease by %v: want the 10s timeout", u.AttemptDeadline, u.LeaseUntil)
			}
		})
	}
}

// A Serverless Workflow item's lease that ran out with attempts left is
// delivered again at once; one that ran past its timeout raises a timeout
// error at the task (here, with no try/catch, faulting the instance).
func TestExpiredLeaseOfAServerlessItem(t *testing.T) {
	w := swStarted(t, swCall)
	task := w.deliver(w.only().StepID)
	w.now = task.LeaseUntil.Add(-time.Second)
	task.LeaseUntil = w.now // the worker stopped heartbeating
	ch, ok, err := w.env.ExpireLease(w.c, w.inst, task, w.now)
	if err != nil || !ok {
		t.Fatalf("expire: %v, %v", ok, err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusRunning)
	if u := ch.Update[0]; u.Task.Status != store.TaskQueued || !u.Task.RunAt.Equal(w.now) || u.Guard != store.GuardOf(task) || !ch.Notify {
		t.Errorf("the expired attempt's update %+v, notify %v", u, ch.Notify)
	}

	task = w.deliver(task.StepID)
	w.now = task.AttemptDeadline
	ch, ok, err = w.env.ExpireLease(w.c, w.inst, task, w.now)
	if err != nil || !ok {
		t.Fatalf("expire: %v, %v", ok, err)
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	rt, err := SWRuntime(w.inst.State)
	if err != nil {
		t.Fatal(err)
	}
	if f := rt.Fault; f == nil || f.Type != sw.ErrorTypePrefix+sw.KindTimeout || f.Status != 408 || f.Detail != "attempt 2 timed out" {
		t.Errorf("fault %+v", f)
	}
	if tk := w.tasks[task.StepID]; tk.Status != store.TaskFailed {
		t.Errorf("the timed-out task %+v", tk)
	}
}

// An event completes a flowd wait step with its data, and resumes a
// Serverless Workflow's listen task with the event as a CloudEvent.
func TestEventInEachLanguage(t *testing.T) {
	worlds := map[string]func() *world{
		"flowd": func() *world {
			return started(t, "name: l\nsteps:\n  - {id: wait, type: wait, event: payment}\n", `{}`)
		},
		"serverless": func() *world { return swStarted(t, swListen) },
	}
	for name, start := range worlds {
		t.Run(name, func(t *testing.T) {
			w := start()
			task := w.only()
			ev := Event{ID: "ev-1", Name: "payment", Data: json.RawMessage(`{"paid":1}`), CreatedAt: t0}
			ch, err := w.env.CompleteByEvent(w.c, w.inst, task, ev, w.now)
			if err != nil {
				t.Fatal(err)
			}
			w.apply(ch)
			w.wantStatus(workflow.StatusCompleted)
			if u := ch.Update[len(ch.Update)-1]; u.Task.Status != store.TaskDone || u.Guard != store.GuardOf(task) {
				t.Errorf("the waiter's update %+v", u)
			}
			// A listen task outputs the data of the events it took.
			want := `{"wait":{"paid":1}}`
			if name == "serverless" {
				want = `[{"paid":1}]`
			}
			if string(ch.Output) != want {
				t.Errorf("output %s, want %s", ch.Output, want)
			}
		})
	}
}

// A resume of a flowd instance schedules what became ready while it was
// paused; a Serverless Workflow's pending items wait in their rows, so its
// pause and resume write the status alone, and a batch's resume nothing
// more (Reopen).
func TestPauseAndResumeInEachLanguage(t *testing.T) {
	worlds := map[string]func() *world{
		"flowd": func() *world {
			return started(t, "name: r\nsteps:\n  - {id: a, type: task, handler: h}\n  - {id: b, type: task, handler: h, depends_on: [a]}\n", `{}`)
		},
		"serverless": func() *world {
			return swStarted(t, `
document: {dsl: '1.0.0', namespace: test, name: r, version: '1.0.0'}
do:
  - a:
      call: h
  - b:
      call: h
`)
		},
	}
	for name, start := range worlds {
		t.Run(name, func(t *testing.T) {
			w := start()
			task := w.deliver(w.only().StepID)
			if _, err := w.act("pause"); err != nil {
				t.Fatal(err)
			}
			// The attempt in flight finishes while paused.
			w.complete(task.StepID, `1`)
			w.wantStatus(workflow.StatusPaused)
			inst := *w.inst
			inst.State = w.inst.State.Clone()
			reopened := w.env.Reopen(w.c, &inst, w.tasks, false, w.now) // as a batch does
			ch, err := w.act("resume")
			if err != nil {
				t.Fatal(err)
			}
			w.wantStatus(workflow.StatusRunning)
			if !ch.Notify || !reopened.Notify || reopened.Status != workflow.StatusRunning {
				t.Errorf("notify: act %v, reopen %v; reopen's status %s", ch.Notify, reopened.Notify, reopened.Status)
			}
			if name == "flowd" {
				if len(ch.Insert) != 1 || ch.Insert[0].StepID != "b" || len(reopened.Insert) != 1 {
					t.Errorf("act inserted %+v, reopen inserted %+v", ch.Insert, reopened.Insert)
				}
				return
			}
			if len(ch.Insert)+len(ch.Update)+len(reopened.Insert)+len(reopened.Update) != 0 {
				t.Errorf("act %+v, reopen %+v", ch, reopened)
			}
		})
	}
}

// The definition a child workflow starts is a flowd workflow step's, or a
// Serverless Workflow's pending `run: workflow` item's; no other step
// starts one.
func TestChildDefinitionInEachLanguage(t *testing.T) {
	flowd := started(t, "name: p\nsteps:\n  - {id: sub, type: workflow, definition: kid}\n  - {id: h, type: task, handler: h}\n", `{}`)
	serverless := swStarted(t, `
document: {dsl: '1.0.0', namespace: test, name: p, version: '1.0.0'}
do:
  - sub:
      run:
        workflow: {namespace: test, name: kid, version: '1.0.0'}
`)
	item := serverless.only().StepID
	for _, tc := range []struct {
		w          *world
		step, want string
	}{
		{flowd, "sub", "kid"}, {flowd, "h", ""}, {flowd, "nope", ""},
		{serverless, item, "kid"}, {serverless, "nope", ""},
	} {
		if got := tc.w.c.Language.ChildDefinition(tc.w.inst, tc.step); got != tc.want {
			t.Errorf("%s step %s: child definition %q, want %q", tc.w.c.Def.Name, tc.step, got, tc.want)
		}
	}
	if !strings.HasPrefix(item, "sw-") {
		t.Errorf("the item's id %q", item)
	}
}
