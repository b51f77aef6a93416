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

const diamond = `
name: diamond
timeout: 1h
steps:
  - {id: a, type: task, handler: h, input: {n: "{{ .input.n }}"}}
  - {id: b, type: task, handler: h, depends_on: [a], input: "{{ .steps.a.output }}"}
  - {id: c, type: wait, depends_on: [a]}
  - {id: d, type: task, handler: h, depends_on: [b, c]}
`

func TestStartSchedulesTheRootsOfTheDAG(t *testing.T) {
	w := started(t, diamond, `{"n": 7}`)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepPending, "c": workflow.StepPending, "d": workflow.StepPending})
	a := w.tasks["a"]
	if len(w.tasks) != 1 || a == nil || a.Status != store.TaskQueued || a.Queue != "h" || a.MaxAttempts != workflow.DefaultMaxAttempts || !a.RunAt.Equal(t0) {
		t.Fatalf("tasks after start: %+v", w.tasks)
	}
	if string(a.Input) != `{"n":7}` {
		t.Errorf("a's rendered input = %s", a.Input)
	}
	if w.inst.Deadline == nil || !w.inst.Deadline.Equal(t0.Add(time.Hour)) {
		t.Errorf("deadline = %v, want start + the workflow timeout", w.inst.Deadline)
	}
}

func TestStartWithQueuedTaskNotifiesWorkers(t *testing.T) {
	env := testEnv()
	c := compileDef(t, diamond)
	inst := &workflow.Instance{ID: "x", Input: json.RawMessage(`{"n": 1}`), State: c.Def.InitialState()}
	ch, err := env.Start(c, inst, t0)
	if err != nil || !ch.Notify || len(ch.Insert) != 1 || ch.Insert[0].ID != "id-1" {
		t.Fatalf("start: %+v, %v", ch, err)
	}
}

func TestCompletionSchedulesDependentsAndSettlesCompleted(t *testing.T) {
	w := started(t, diamond, `{"n": 7}`)
	w.deliver("a")
	ch := w.complete("a", `{"x": 1}`)
	if w.step("a").Attempts != 1 {
		t.Errorf("a's attempts after its completion = %d, want 1", w.step("a").Attempts)
	}
	if ch.Cause != `step "a" completed (attempt 1)` || !ch.Notify {
		t.Errorf("completion: cause %q, notify %v", ch.Cause, ch.Notify)
	}
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepCompleted, "b": workflow.StepRunning, "c": workflow.StepWaiting, "d": workflow.StepPending})
	if w.tasks["a"].Status != store.TaskDone || w.tasks["a"].Lease != "" || w.tasks["c"] != nil {
		t.Errorf("a's task %+v; a wait step has no task: %+v", w.tasks["a"], w.tasks["c"])
	}
	if string(w.tasks["b"].Input) != `{"x":1}` {
		t.Errorf("b's input = %s, want a's output", w.tasks["b"].Input)
	}
	w.deliver("b")
	w.complete("b", `2`)
	w.wantSteps(map[string]workflow.StepStatus{"d": workflow.StepPending}) // c still waits
	ext, err := w.env.CompleteStep(w.c, w.inst, ExternalCompletion{Step: "c", Output: json.RawMessage(`"go"`)}, w.now)
	if err != nil {
		t.Fatalf("completing the wait step: %v", err)
	}
	w.apply(ext)
	w.wantSteps(map[string]workflow.StepStatus{"c": workflow.StepCompleted, "d": workflow.StepRunning})
	w.deliver("d")
	w.complete("d", `null`)
	w.wantStatus(workflow.StatusCompleted)
}

func TestIsTimer(t *testing.T) {
	if !IsTimer(store.QueueSleep) || !IsTimer(store.QueueTick) || IsTimer("h") || IsTimer(store.QueueHTTP) {
		t.Error("IsTimer: sleeps and ticks are timers, a handler's and the http queue are not")
	}
}

func TestRetryBacksOffWithDeterministicJitter(t *testing.T) {
	w := started(t, `
name: r
steps:
  - {id: a, type: task, handler: h, retry: {max_attempts: 3, initial_backoff: 1s, max_backoff: 1m}}
`, `{}`)
	// Jitter 0.5 of an equal-jitter backoff: 3/4 of the base, the base
	// doubling per attempt.
	w.deliver("a")
	ch := w.fail("a", "boom", true)
	if ch.Cause != `step "a" attempt 1 failed` || !ch.Notify {
		t.Errorf("failure: cause %q notify %v", ch.Cause, ch.Notify)
	}
	if a := w.tasks["a"]; a.Status != store.TaskQueued || !a.RunAt.Equal(t0.Add(750*time.Millisecond)) || a.Lease != "" || a.LastError != "boom" {
		t.Fatalf("after attempt 1: %+v", a)
	}
	w.wantStatus(workflow.StatusRunning)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepRunning})
	w.deliver("a")
	w.fail("a", "boom", true)
	if a := w.tasks["a"]; !a.RunAt.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("after attempt 2: run at +%v, want +1.5s", a.RunAt.Sub(t0))
	}
	if w.step("a").Attempts != 2 || w.step("a").Error != "boom" {
		t.Errorf("step a: %+v", w.step("a"))
	}
}

func TestExhaustedAttemptsFailTheInstanceAndCancelOtherActiveSteps(t *testing.T) {
	w := started(t, `
name: x
steps:
  - {id: a, type: task, handler: h, retry: {max_attempts: 2}}
  - {id: b, type: task, handler: h}
  - {id: c, type: wait}
  - {id: d, type: task, handler: h, depends_on: [a]}
`, `{}`)
	w.deliver("a")
	w.fail("a", "one", true)
	w.deliver("a")
	w.fail("a", "two", true)
	w.wantStatus(workflow.StatusFailed)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepFailed, "b": workflow.StepCancelled, "c": workflow.StepCancelled, "d": workflow.StepPending})
	if w.tasks["a"].Status != store.TaskFailed {
		t.Errorf("a's task: %+v", w.tasks["a"])
	}
}

func TestNonRetryableFailureFailsTheStepAtOnce(t *testing.T) {
	w := started(t, `
name: p
steps:
  - {id: a, type: task, handler: h}
`, `{}`)
	w.deliver("a")
	w.fail("a", "  ", false)
	w.wantStatus(workflow.StatusFailed)
	if w.step("a").Error != "failed without an error message" {
		t.Errorf("a blank message is replaced: %q", w.step("a").Error)
	}
}

func TestLeaseExpiryUsesUpAnAttempt(t *testing.T) {
	w := started(t, `
name: e
steps:
  - {id: a, type: task, handler: h, retry: {max_attempts: 2}}
`, `{}`)
	leased := w.deliver("a")
	w.now = t0.Add(time.Minute)
	if !LeaseEnded(leased, w.now) || LeaseEnded(leased, leased.LeaseUntil.Add(-time.Nanosecond)) {
		t.Fatalf("LeaseEnded of a lease until %v: false at %v, or true before", leased.LeaseUntil, w.now)
	}
	ch, ok, _ := w.env.ExpireLease(w.c, w.inst, leased, w.now)
	if !ok || ch.Cause != `step "a": lease expired (attempt 1)` {
		t.Fatalf("expiry: %+v, %v", ch, ok)
	}
	// Guarded by the row as read, whose lease ended: a renewal since
	// makes it miss.
	if g := ch.Update[0].Guard; g != store.GuardOf(leased) || g.Lease == "" {
		t.Errorf("expiry guard %+v, want the row as read %+v", g, *leased)
	}
	w.apply(ch)
	if a := w.tasks["a"]; a.Status != store.TaskQueued || !a.RunAt.Equal(w.now) || a.Lease != "" {
		t.Errorf("re-queued at once, without backoff: %+v", a)
	}
	w.deliver("a")
	ch, ok, _ = w.env.ExpireLease(w.c, w.inst, w.tasks["a"], w.now.Add(time.Minute))
	if !ok {
		t.Fatal("second expiry")
	}
	w.apply(ch)
	w.wantStatus(workflow.StatusFailed)
	if w.step("a").Attempts != 2 || w.tasks["a"].Status != store.TaskFailed {
		t.Errorf("the last attempt expired: %+v, %+v", w.step("a"), w.tasks["a"])
	}
}

func TestExpiryReasonNamesTheAttemptDeadline(t *testing.T) {
	task := &store.Task{Attempt: 2, AttemptDeadline: t0}
	if got := ExpiryReason(task, t0); got != "attempt 2 timed out" {
		t.Errorf("%q", got)
	}
	if got := ExpiryReason(&store.Task{Attempt: 1}, t0); got != "lease expired (attempt 1)" {
		t.Errorf("%q", got)
	}
}

func TestExpiredTimerRunsAgainWithoutUsingAnAttempt(t *testing.T) {
	task := &store.Task{Queue: store.QueueSleep, Status: store.TaskLeased, Attempt: 1, MaxAttempts: 1, Lease: "l"}
	ExpireTimer(task, t0)
	if task.Status != store.TaskQueued || task.MaxAttempts != 2 || task.Lease != "" || !task.RunAt.Equal(t0) {
		t.Errorf("%+v", task)
	}
}

func TestExpiryOfAStepNoLongerRunningCancelsOnlyTheTask(t *testing.T) {
	w := started(t, diamond, `{"n": 1}`)
	task := *w.deliver("a")
	w.inst.Status = workflow.StatusFailed
	if _, ok, _ := w.env.ExpireLease(w.c, w.inst, &task, t0.Add(time.Hour)); ok {
		t.Fatal("an expiry of a stopped instance's task changes the instance")
	}
	CancelTask(&task)
	if task.Status != store.TaskCancelled || task.Lease != "" {
		t.Errorf("%+v", task)
	}
}

func TestFencingRefusesStaleExpiredAndStoppedCompletions(t *testing.T) {
	w := started(t, diamond, `{"n": 1}`)
	task := *w.deliver("a")
	cases := []struct {
		name  string
		lease string
		now   time.Time
		prep  func(inst *workflow.Instance, t *store.Task)
		want  error
	}{
		{"stale lease", "someone-else", t0, nil, ErrLeaseLost},
		{"no lease", "", t0, nil, ErrLeaseLost},
		{"expired lease", task.Lease, task.LeaseUntil, nil, ErrLeaseLost},
		{"task no longer leased", task.Lease, t0, func(_ *workflow.Instance, t *store.Task) { t.Status = store.TaskQueued }, ErrLeaseLost},
		{"instance failed", task.Lease, t0, func(i *workflow.Instance, _ *store.Task) { i.Status = workflow.StatusFailed }, ErrNotRunning},
		{"instance timed out", task.Lease, t0, func(i *workflow.Instance, _ *store.Task) { i.Status = workflow.StatusTimedOut }, ErrNotRunning},
		{"instance cancelled", task.Lease, t0, func(i *workflow.Instance, _ *store.Task) { i.Status = workflow.StatusCancelled }, ErrNotRunning},
		{"step completed another way", task.Lease, t0, func(i *workflow.Instance, _ *store.Task) { i.State.Steps["a"].Status = workflow.StepCompleted }, ErrLeaseLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inst := *w.inst
			inst.State = w.inst.State.Clone()
			tk := task
			if tc.prep != nil {
				tc.prep(&inst, &tk)
			}
			if _, err := w.env.CompleteTask(w.c, &inst, &tk, tc.lease, json.RawMessage(`1`), NextLease{}, tc.now); !errors.Is(err, tc.want) {
				t.Errorf("completion: %v, want %v", err, tc.want)
			}
			if _, err := w.env.FailTask(w.c, &inst, &tk, tc.lease, "x", true, tc.now); !errors.Is(err, tc.want) {
				t.Errorf("failure: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestHeartbeatExtendsTheLeaseUpToTheAttemptDeadline(t *testing.T) {
	inst := &workflow.Instance{ID: "x", Status: workflow.StatusPaused,
		State: workflow.State{Steps: map[string]*workflow.StepState{"s": {Status: workflow.StepRunning}}}}
	task := &store.Task{StepID: "s", Status: store.TaskLeased, Lease: "l", LeaseUntil: t0.Add(time.Second), AttemptDeadline: t0.Add(10 * time.Second)}
	until, err := ExtendLease(task, inst, t0, 30*time.Second)
	if err != nil || !until.Equal(t0.Add(10*time.Second)) {
		t.Errorf("heartbeat of a paused instance's task: %v, %v", until, err)
	}
	// A step that no longer runs (withdrawn by a join: first) takes no
	// heartbeat, as it takes no completion.
	inst.State.Steps["s"].Status = workflow.StepSkipped
	if _, err := ExtendLease(task, inst, t0, time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("heartbeat of a skipped step's task: %v", err)
	}
	inst.Status = workflow.StatusCancelled
	if _, err := ExtendLease(task, inst, t0, time.Second); !errors.Is(err, ErrNotRunning) {
		t.Errorf("heartbeat of a cancelled instance's task: %v", err)
	}
}

func TestGiveBackKeepsTheAttemptBudget(t *testing.T) {
	task := &store.Task{Status: store.TaskLeased, Lease: "l", Attempt: 2, MaxAttempts: 3, LeaseUntil: t0.Add(time.Second)}
	if err := GiveBack(task, "other", t0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a stale lease gives back: %v", err)
	}
	if err := GiveBack(task, "l", t0); err != nil || task.Status != store.TaskQueued || task.MaxAttempts != 4 || task.Lease != "" {
		t.Errorf("give back: %+v, %v", task, err)
	}
}

func TestCompletionLeasesTheNextDueTaskOfTheWorkersQueues(t *testing.T) {
	w := started(t, `
name: n
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a]}
  - {id: z, type: sleep, duration: 1s, depends_on: [a]}
`, `{}`)
	task := w.deliver("a")
	ch, err := w.env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage(`1`), NextLease{Queues: []string{"h", store.QueueSleep}, Owner: "me", Lease: time.Minute}, w.now)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Next == nil || ch.Next.StepID != "b" || ch.Next.Status != store.TaskLeased || ch.Next.LeaseOwner != "me" || ch.Next.Attempt != 1 {
		t.Fatalf("next: %+v", ch.Next)
	}
	if ch.State.Steps["b"].Attempts != 1 {
		t.Errorf("b's state counts the delivered attempt: %+v", ch.State.Steps["b"])
	}
	// The timer is left queued for the claim loop; it still wakes workers.
	for _, in := range ch.Insert {
		if in.StepID == "z" && in.Status != store.TaskQueued {
			t.Errorf("timer leased: %+v", in)
		}
	}
	if !ch.Notify {
		t.Error("a queued timer needs a wake-up")
	}
}

func TestPausedInstanceRecordsAttemptsInFlightAndSchedulesNothing(t *testing.T) {
	w := started(t, `
name: p
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h}
  - {id: c, type: task, handler: h, depends_on: [a]}
`, `{}`)
	w.deliver("a")
	if _, err := w.act("pause"); err != nil {
		t.Fatal(err)
	}
	w.wantStatus(workflow.StatusPaused)
	// A queued task of a paused instance is held: no claim takes it.
	if !Held(w.inst.Status, w.tasks["b"].Queue) {
		t.Error("a paused instance's queued task is not held")
	}
	// The completion of a leased task is recorded; nothing new runs.
	w.complete("a", `1`)
	w.wantStatus(workflow.StatusPaused)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepCompleted, "c": workflow.StepPending})
	ch, err := w.act("resume")
	if err != nil || !ch.Notify || ch.Settled != "" {
		t.Fatalf("resume: %+v, %v", ch, err)
	}
	w.wantStatus(workflow.StatusRunning)
	w.wantSteps(map[string]workflow.StepStatus{"c": workflow.StepRunning})
}

func TestLastStepCompletingWhilePausedCompletesOnResume(t *testing.T) {
	w := started(t, `
name: p
steps:
  - {id: a, type: task, handler: h}
`, `{}`)
	w.deliver("a")
	if _, err := w.act("pause"); err != nil {
		t.Fatal(err)
	}
	w.complete("a", `1`)
	w.wantStatus(workflow.StatusPaused)
	v := w.inst.Version
	ch, err := w.act("resume")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Status != workflow.StatusRunning || ch.Settled != workflow.StatusCompleted || ch.SettledCause != "COMPLETED after resume" {
		t.Fatalf("resume: status %s settled %s (%q)", ch.Status, ch.Settled, ch.SettledCause)
	}
	if w.inst.Version != v+2 {
		t.Errorf("two versions: RUNNING, then COMPLETED; got %d → %d", v, w.inst.Version)
	}
}

func TestTimeOutAppliesToRunningAndPausedPastTheirDeadline(t *testing.T) {
	for _, status := range workflow.Statuses {
		t.Run(string(status), func(t *testing.T) {
			w := started(t, diamond, `{"n": 1}`)
			w.deliver("a")
			w.inst.Status = status
			ch, ok := TimeOut(w.inst, t0.Add(2*time.Hour))
			want := status == workflow.StatusRunning || status == workflow.StatusPaused
			if ok != want {
				t.Fatalf("timed out: %v, want %v", ok, want)
			}
			if ok && (ch.Status != workflow.StatusTimedOut || ch.State.Steps["a"].Status != workflow.StepCancelled || ch.Cause != "workflow timeout") {
				t.Errorf("%+v", ch)
			}
		})
	}
	w := started(t, diamond, `{"n": 1}`)
	if _, ok := TimeOut(w.inst, t0.Add(time.Minute)); ok {
		t.Error("timed out before its deadline")
	}
}

func TestTimedOutInstanceRefusesCompletionsAndRetriesWithANewDeadline(t *testing.T) {
	w := started(t, diamond, `{"n": 1}`)
	task := *w.deliver("a")
	w.now = t0.Add(2 * time.Hour)
	ch, _ := TimeOut(w.inst, w.now)
	w.apply(ch)
	task.LeaseUntil = w.now.Add(time.Hour) // still leased: only the instance refuses
	if _, err := w.env.CompleteTask(w.c, w.inst, &task, task.Lease, json.RawMessage(`1`), NextLease{}, w.now); !errors.Is(err, ErrNotRunning) {
		t.Errorf("completion of a timed-out instance's task: %v", err)
	}
	if _, err := w.act("retry"); err != nil {
		t.Fatal(err)
	}
	w.wantStatus(workflow.StatusRunning)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepRunning})
	if !w.inst.Deadline.Equal(w.now.Add(time.Hour)) {
		t.Errorf("deadline after retry: %v", w.inst.Deadline)
	}
}

func TestRetryRestoresFailedAndCancelledStepsOnTheirRows(t *testing.T) {
	w := started(t, `
name: r
steps:
  - {id: a, type: task, handler: h, retry: {max_attempts: 2}}
  - {id: b, type: task, handler: h}
  - {id: c, type: task, handler: h, depends_on: [a]}
`, `{}`)
	w.deliver("a")
	w.deliver("b")
	w.fail("a", "x", false)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepFailed, "b": workflow.StepCancelled, "c": workflow.StepPending})
	bLease := w.tasks["b"].Lease
	ch, err := w.act("retry")
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Insert) != 0 || len(ch.Update) != 2 || !ch.Notify {
		t.Fatalf("retry re-queues the two existing rows: %+v", ch)
	}
	w.wantStatus(workflow.StatusRunning)
	w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepRunning, "c": workflow.StepPending})
	a, b := w.tasks["a"], w.tasks["b"]
	if a.Status != store.TaskQueued || a.MaxAttempts != a.Attempt+2 || a.LastError != "" {
		t.Errorf("a re-queued with a fresh budget: %+v", a)
	}
	if b.Lease != "" || b.Status != store.TaskQueued || bLease == "" {
		t.Errorf("b's old lease is fenced off: %+v", b)
	}
	// The first retried failure backs off from the initial backoff again.
	w.deliver("a")
	w.fail("a", "y", true)
	if got := w.tasks["a"].RunAt.Sub(w.now); got != 750*time.Millisecond {
		t.Errorf("backoff after a retry = %v, want the first one", got)
	}
}

func TestActionTransitionTable(t *testing.T) {
	allowed := map[string]map[workflow.Status]workflow.Status{
		"cancel": {workflow.StatusPending: workflow.StatusCancelled, workflow.StatusQueued: workflow.StatusCancelled, workflow.StatusRunning: workflow.StatusCancelled, workflow.StatusPaused: workflow.StatusCancelled},
		"pause":  {workflow.StatusRunning: workflow.StatusPaused},
		"resume": {workflow.StatusPaused: workflow.StatusRunning},
		"retry":  {workflow.StatusFailed: workflow.StatusRunning, workflow.StatusTimedOut: workflow.StatusRunning},
	}
	env := testEnv()
	for _, action := range Actions {
		for _, from := range workflow.Statuses {
			t.Run(action+"/"+string(from), func(t *testing.T) {
				// Free-form: the status change is all there is.
				inst := &workflow.Instance{ID: "x", Status: from}
				ch, err := env.Act(nil, inst, action, nil, t0)
				to, ok := allowed[action][from]
				if !ok {
					var na *NotAllowedError
					if !errors.As(err, &na) || !errors.Is(err, ErrActionNotAllowed) || !strings.Contains(na.Msg, string(from)) {
						t.Fatalf("err = %v, want a NotAllowedError", err)
					}
					return
				}
				if err != nil || ch.Status != to || ch.Settled != "" {
					t.Fatalf("%s from %s: %+v, %v; want %s", action, from, ch, err, to)
				}
				if got, ok := ActionFor(from, to); !ok || got != action {
					t.Errorf("the transition %s → %s is action %q (%v), want %s", from, to, got, ok, action)
				}
			})
		}
	}
	if _, err := env.Act(nil, &workflow.Instance{}, "explode", nil, t0); err == nil {
		t.Error("an unknown action was accepted")
	}
	for _, tr := range [][2]workflow.Status{{workflow.StatusRunning, workflow.StatusCompleted}, {workflow.StatusRunning, workflow.StatusFailed}, {workflow.StatusPending, workflow.StatusRunning}, {workflow.StatusRunning, workflow.StatusTimedOut}} {
		if a, ok := ActionFor(tr[0], tr[1]); ok {
			t.Errorf("%s → %s is action %s; it changes the status alone", tr[0], tr[1], a)
		}
	}
}

func TestCancelReleasesActiveTasksOnly(t *testing.T) {
	us := CancelTasks([]store.Task{
		{ID: "q", Status: store.TaskQueued}, {ID: "l", Status: store.TaskLeased, Lease: "x"}, {ID: "d", Status: store.TaskDone}, {ID: "f", Status: store.TaskFailed},
	})
	if len(us) != 2 || us[0].Task.ID != "q" || us[1].Task.ID != "l" || us[1].Task.Status != store.TaskCancelled || us[1].Task.Lease != "" {
		t.Errorf("%+v", us)
	}
}

func TestBatchReopenIsOneChange(t *testing.T) {
	w := started(t, `
name: b
steps:
  - {id: a, type: task, handler: h}
`, `{}`)
	paused := *w.inst
	paused.State, paused.Status = w.inst.State.Clone(), workflow.StatusPaused
	ch := w.env.Reopen(w.c, &paused, w.tasks, false, t0)
	if ch.Status != workflow.StatusRunning || ch.Settled != "" || len(ch.Insert)+len(ch.Update) != 0 || !ch.Notify {
		t.Errorf("a resume by batch with nothing ready: %+v; want RUNNING alone, notifying", ch)
	}
	w.deliver("a")
	w.fail("a", "x", false)
	w.wantStatus(workflow.StatusFailed)
	ch = w.env.Reopen(w.c, w.inst, w.tasks, true, t0)
	if ch.Status != workflow.StatusRunning || len(ch.Update) != 1 || ch.State.Steps["a"].Status != workflow.StepRunning {
		t.Errorf("a retry by batch: %+v; want RUNNING with a re-queued", ch)
	}
}

func TestExternalCompletion(t *testing.T) {
	const def = `
name: ext
steps:
  - {id: a, type: task, handler: h}
  - {id: w, type: wait}
  - {id: b, type: task, handler: h, depends_on: [a]}
`
	v := int64(99)
	cases := []struct {
		name  string
		step  string
		prep  func(w *world)
		ver   *int64
		want  error
		check func(t *testing.T, w *world, ch Change)
	}{
		{name: "waiting step completes", step: "w", check: func(t *testing.T, w *world, ch Change) {
			w.wantSteps(map[string]workflow.StepStatus{"w": workflow.StepCompleted})
		}},
		{name: "running task step completes and its lease is revoked", step: "a", prep: func(w *world) { w.deliver("a") }, check: func(t *testing.T, w *world, ch Change) {
			if len(ch.Update) != 1 || ch.Update[0].Task.Status != store.TaskCancelled || ch.Update[0].Task.Lease != "" {
				t.Errorf("revocation: %+v", ch.Update)
			}
			w.wantSteps(map[string]workflow.StepStatus{"a": workflow.StepCompleted, "b": workflow.StepRunning})
			if w.step("a").Attempts != 1 {
				t.Errorf("attempts: %d", w.step("a").Attempts)
			}
		}},
		{name: "pending step is refused", step: "b", want: ErrStepNotReady},
		{name: "unknown step is refused", step: "nope", want: workflow.ErrUnknownStep},
		{name: "completed step is refused", step: "w", prep: func(w *world) { w.inst.State.Steps["w"].Status = workflow.StepCompleted }, want: workflow.ErrStepCompleted},
		{name: "stale version is refused", step: "w", ver: &v},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := started(t, def, `{}`)
			if tc.prep != nil {
				tc.prep(w)
			}
			ch, err := w.env.CompleteStep(w.c, w.inst, ExternalCompletion{Step: tc.step, Output: json.RawMessage(`"o"`), ExpectedVersion: tc.ver, Task: w.tasks[tc.step]}, w.now)
			if tc.ver != nil {
				var vm *VersionMismatchError
				if !errors.As(err, &vm) || vm.Expected != 99 || vm.Actual != w.inst.Version {
					t.Fatalf("err = %v, want a version mismatch", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil {
				if ch.Cause != CompleteStepCause(tc.step) {
					t.Errorf("cause %q", ch.Cause)
				}
				w.apply(ch)
				tc.check(t, w, ch)
			}
		})
	}
	t.Run("free-form step completes", func(t *testing.T) {
		inst := &workflow.Instance{ID: "f", Status: workflow.StatusPending, State: workflow.State{Steps: map[string]*workflow.StepState{"s": {Status: workflow.StepPending}}}}
		ch, err := testEnv().CompleteStep(nil, inst, ExternalCompletion{Step: "s", Output: json.RawMessage(`1`)}, t0)
		if err != nil || ch.State.Steps["s"].Status != workflow.StepCompleted || ch.Status != workflow.StatusPending {
			t.Errorf("%+v, %v", ch, err)
		}
	})
}

func TestTemplateFailureFailsTheStepWithoutRetry(t *testing.T) {
	w := started(t, `
name: tpl
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: [a], input: "{{ .steps.a.output.missing }}"}
`, `{}`)
	w.deliver("a")
	w.complete("a", `{"other": 1}`)
	w.wantStatus(workflow.StatusFailed)
	if b := w.step("b"); b.Status != workflow.StepFailed || b.Error == "" || w.tasks["b"] != nil {
		t.Errorf("b: %+v, task %+v", b, w.tasks["b"])
	}
}

func TestStateTooLargeIsRefused(t *testing.T) {
	w := started(t, diamond, `{"n": 1}`)
	task := w.deliver("a")
	w.env.MaxStateBytes = 200
	_, err := w.env.CompleteTask(w.c, w.inst, task, task.Lease, json.RawMessage(`"`+strings.Repeat("x", 300)+`"`), NextLease{}, w.now)
	if !errors.Is(err, workflow.ErrStateTooLarge) {
		t.Errorf("err = %v", err)
	}
}

func TestHTTPStepRendersItsRequest(t *testing.T) {
	w := started(t, `
name: h
steps:
  - {id: a, type: http, request: {method: POST, url: "https://x/{{ .input.id }}", headers: {X-N: "{{ .input.id }}"}, body: {id: "{{ .input.id }}"}}}
`, `{"id": "q"}`)
	a := w.tasks["a"]
	if a.Queue != store.QueueHTTP || string(a.Input) != `{"method":"POST","url":"https://x/q","headers":{"X-N":"q"},"body":{"id":"q"}}` {
		t.Errorf("%s %s", a.Queue, a.Input)
	}
}
