package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Workflows as code. The function runs on a worker; each run is the
// delivery of a run task (its step id workflow.RunStep(n)) and replays the
// function from the top, taking the steps already recorded from
// state.steps (the journal) instead of running them again. What the
// function records:
//
//   - a step's outcome (Checkpoint): state.steps.NAME COMPLETED with its
//     output, or FAILED with its error, for good: a step is recorded once;
//   - the things it waits for (Suspend): sleeps (a timer task), events (a
//     task in the event's queue) — each a WAITING step — and the run ends;
//     the first of them to finish queues a new run.
//
// Every entry says its kind and seq, the order it was recorded in. The
// run's own bookkeeping (which run is current, whether it ended waiting,
// the last seq) is state.code, in the instance's header.

// CodeStateKey is the top-level key of a code workflow's state holding its
// runs' bookkeeping (CodeRuns).
const CodeStateKey = workflow.CodeStateKey

// The kinds of a code workflow's recorded entries (state.steps.S.kind).
const (
	KindStep  = "step"
	KindSleep = "sleep"
	KindEvent = "event"
	KindChild = "child"
)

// CodeRuns is state.code: Run is the current run's number (its task's step
// id is workflow.RunStep(Run)); Waiting says the run ended waiting, so the
// next thing to finish queues run Run+1; Seq is the seq of the latest
// entry recorded; Error is why the workflow failed for good.
type CodeRuns struct {
	Run     int  `json:"run"`
	Waiting bool `json:"waiting,omitempty"`
	Seq     int  `json:"seq"`
	// Finished counts the waits that finished (each entry's "finished").
	Finished int    `json:"finished,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ErrNonDeterminism: the code asked for an entry under a name recorded
// with another kind; the run fails for good.
var ErrNonDeterminism = errors.New("non-determinism")

// codeRuns decodes state.code.
func codeRuns(s workflow.State) (CodeRuns, error) {
	var r CodeRuns
	raw, ok := s.Extra[CodeStateKey]
	if !ok {
		return r, fmt.Errorf("%w: the state has no %q record of its runs", workflow.ErrInvalidState, CodeStateKey)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%w: state.%s: %w", workflow.ErrInvalidState, CodeStateKey, err)
	}
	return r, nil
}

func setCodeRuns(s *workflow.State, r CodeRuns) {
	raw, _ := json.Marshal(r)
	if s.Extra == nil {
		s.Extra = map[string]json.RawMessage{}
	}
	s.Extra[CodeStateKey] = raw
}

// code is the Language of code definitions.
type code struct{ c *Definition }

// CanRetry: a retried code workflow runs its function again; the steps
// that failed for good run again, those that completed do not.
func (code) CanRetry() bool { return true }

// ChildDefinition is the definition a child wait names.
func (code) ChildDefinition(inst *workflow.Instance, step string) string {
	var name string
	if st := inst.State.Steps[step]; st != nil && entryKind(st) == KindChild {
		_ = json.Unmarshal(st.Extra["definition"], &name)
	}
	return name
}

// completesStepsFromOutside: only its code records a code workflow's steps.
func (code) completesStepsFromOutside() bool { return false }

// runTask is the row of run n of inst: queued now in the handler's queue,
// its attempts the definition's retry budget.
func (l code) runTask(env Env, inst *workflow.Instance, n int, now time.Time) store.Task {
	input := inst.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	return store.Task{ID: env.NewID(), InstanceID: inst.ID, StepID: workflow.RunStep(n), Queue: l.c.Def.Code.Handler,
		Status: store.TaskQueued, MaxAttempts: l.c.Def.RunRetryPolicy().MaxAttempts, RunAt: now, Input: input,
		Flow: workflow.TaskFlow{Priority: inst.Priority}}
}

// start queues the first run (of the journal it starts with: none, or a
// re-run's).
func (l code) start(env Env, inst *workflow.Instance, now time.Time) (Change, error) {
	inst.Status = workflow.StatusRunning
	inst.Deadline = deadline(l.c, now)
	if inst.State.Steps == nil {
		inst.State.Steps = map[string]*workflow.StepState{}
	}
	// A re-run starts with the entries it keeps: the new ones follow them.
	seq, finished := journalCounts(inst.State.Steps)
	setCodeRuns(&inst.State, CodeRuns{Run: 1, Seq: seq, Finished: finished})
	ch := Change{Cause: "start", Insert: []store.Task{l.runTask(env, inst, 1, now)}}
	if err := env.checkSize(inst.State); err != nil {
		return Change{}, err
	}
	ch.setInstance(inst)
	ch.Notify = true
	return ch, nil
}

// holdsRun is the instance's side of the fence for a run task: t is the
// current run, and the run has not ended waiting.
func holdsRun(inst *workflow.Instance, t *store.Task, n int) error {
	r, err := codeRuns(inst.State)
	if err != nil {
		return err
	}
	if r.Run != n || r.Waiting {
		return fmt.Errorf("%w: run %d of workflow %s is over", ErrLeaseLost, n, inst.ID)
	}
	return nil
}

// taskCompleted: the run's completion completes the workflow with the
// function's return value; a timer's completes its sleep.
func (l code) taskCompleted(env Env, inst *workflow.Instance, t *store.Task, output json.RawMessage, now time.Time, ch *Change) error {
	if _, ok := workflow.ParseRunStep(t.StepID); ok {
		inst.Status = workflow.StatusCompleted
		ch.Output = output
		// What the function no longer waits for is withdrawn.
		for _, id := range slices.Sorted(maps.Keys(inst.State.Steps)) {
			if st := inst.State.Steps[id]; st.Status.Active() {
				st.Status = workflow.StepCancelled
				ch.Withdrawn = append(ch.Withdrawn, id)
			}
		}
		ch.setInstance(inst)
		return env.checkSize(inst.State)
	}
	st := inst.State.Steps[t.StepID]
	if st == nil {
		return fmt.Errorf("%w: step %s of workflow %s is not recorded", ErrLeaseLost, t.StepID, inst.ID)
	}
	st.Status, st.Output, st.Error = workflow.StepCompleted, output, ""
	switch {
	case t.Queue == store.QueueSleep && t.Iteration == timeoutIteration:
		// No event came in time: the wait fails, its event task is
		// withdrawn.
		var timer struct {
			Event   string `json:"event"`
			Timeout string `json:"timeout"`
		}
		_ = json.Unmarshal(t.Input, &timer)
		d, _ := time.ParseDuration(timer.Timeout)
		st.Status, st.Output = workflow.StepFailed, nil
		if st.Extra == nil {
			st.Extra = map[string]json.RawMessage{}
		}
		st.Extra["error"] = TimeoutError(timer.Event, d)
		ch.Withdrawn = append(ch.Withdrawn, t.StepID)
	case t.Queue == store.QueueSleep:
		st.Output = json.RawMessage("null")
	}
	if err := l.wake(env, inst, t.StepID, now, ch); err != nil {
		return err
	}
	return env.checkSize(inst.State)
}

// wake records that the wait step has finished (its "finished" number:
// the order waits finished in, so that code awaiting several things takes
// the same first one in every replay), and queues the next run when the
// current one ended waiting. step is "" when none finished now.
func (l code) wake(env Env, inst *workflow.Instance, step string, now time.Time, ch *Change) error {
	r, err := codeRuns(inst.State)
	if err != nil {
		return err
	}
	if st := inst.State.Steps[step]; st != nil {
		r.Finished++
		if st.Extra == nil {
			st.Extra = map[string]json.RawMessage{}
		}
		st.Extra["finished"], _ = json.Marshal(r.Finished)
		setCodeRuns(&inst.State, r)
	}
	if !r.Waiting {
		// The run in flight will find it in the journal.
		ch.setInstance(inst)
		return nil
	}
	r.Run++
	r.Waiting = false
	setCodeRuns(&inst.State, r)
	ch.Insert = append(ch.Insert, l.runTask(env, inst, r.Run, now))
	ch.setInstance(inst)
	return nil
}

// taskFailed: a run that failed is run again per the definition's retry
// while runs are left and the failure is retryable; else the workflow
// fails with its error. A timer whose worker was lost just fires.
func (l code) taskFailed(env Env, inst *workflow.Instance, t *store.Task, msg string, retryable, expired bool, now time.Time, ch *Change) error {
	u := *t
	u.LastError = msg
	clearLease(&u)
	if st := inst.State.Steps[t.StepID]; t.Queue == store.QueueChild && expired && st != nil && st.Status.Active() && st.ChildOf(t.Iteration) == "" {
		// The node that claimed the task died before it started the
		// child (a started child's task stays leased until the child
		// ends): the wait goes on, its task claimed again.
		u.Status, u.RunAt, u.MaxAttempts = store.TaskQueued, now, t.Attempt+1
		ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
		ch.setInstance(inst)
		ch.Notify = true
		return nil
	}
	if t.Queue == store.QueueChild {
		// The child did not complete: the wait fails, and the code sees
		// why.
		u.Status = store.TaskFailed
		ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
		if st := inst.State.Steps[t.StepID]; st != nil {
			st.Status, st.Output, st.Error = workflow.StepFailed, nil, msg
		}
		if err := l.wake(env, inst, t.StepID, now, ch); err != nil {
			return err
		}
		ch.Notify = ch.claimable()
		return nil
	}
	if IsTimer(t.Queue) {
		u.Status = store.TaskDone
		ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
		if err := l.taskCompleted(env, inst, t, nil, now, ch); err != nil {
			return err
		}
		ch.Notify = ch.claimable()
		return nil
	}
	if retryable && t.Attempt < t.MaxAttempts {
		u.Status, u.RunAt = store.TaskQueued, now
		if !expired {
			u.RunAt = now.Add(l.c.Def.RunRetryPolicy().Backoff(t.Attempt, env.Jitter))
		}
		ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
		ch.setInstance(inst)
		ch.Notify = true
		return nil
	}
	u.Status = store.TaskFailed
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
	n, _ := workflow.ParseRunStep(t.StepID)
	if err := l.abort(inst, fmt.Sprintf("run %d failed (attempt %d): %s", n, t.Attempt, msg)); err != nil {
		return err
	}
	inst.Status = workflow.StatusFailed
	ch.setInstance(inst)
	return nil
}

// eventTaken completes the event wait with the event's data.
func (l code) eventTaken(env Env, inst *workflow.Instance, t *store.Task, ev Event, now time.Time, ch *Change) error {
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	st := inst.State.Steps[t.StepID]
	st.Status, st.Output = workflow.StepCompleted, data
	if _, ok := st.Extra["timeout_at"]; ok {
		// Its timeout timer is withdrawn.
		ch.Withdrawn = append(ch.Withdrawn, t.StepID)
	}
	return l.wake(env, inst, t.StepID, now, ch)
}

// eventUndelivered fails the event wait: the function sees the error.
func (l code) eventUndelivered(env Env, inst *workflow.Instance, t *store.Task, reason string, now time.Time, ch *Change) error {
	st := inst.State.Steps[t.StepID]
	st.Status, st.Error = workflow.StepFailed, reason
	return l.wake(env, inst, t.StepID, now, ch)
}

// putTask adds task to ch: inserted, or, when the step has a row of that
// iteration already (a wait of an earlier run under the same name, which a
// retry forgot), that row queued again as task says.
func (env Env) putTask(ch *Change, task store.Task) error {
	prev := env.Tasks[TaskKey(task.StepID, task.Iteration)]
	if prev == nil {
		ch.Insert = append(ch.Insert, task)
		return nil
	}
	if prev.Queue != task.Queue {
		return fmt.Errorf("%w: %q waited for something else before (%s): wait under a new name", store.ErrInvalidArgument, task.StepID, prev.Queue)
	}
	u := *prev
	u.Status, u.RunAt, u.Input, u.LastError, u.MaxAttempts = store.TaskQueued, task.RunAt, task.Input, "", prev.Attempt+1
	clearLease(&u)
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(prev)})
	return nil
}

// reopen: a resumed workflow goes on where it was (its run task is held
// and released with it); a retried one runs its function again in a new
// run, the entries that failed or were cancelled forgotten so that they
// run again.
func (l code) reopen(env Env, inst *workflow.Instance, _ map[string]*store.Task, retry bool, now time.Time, ch *Change) bool {
	if !retry {
		return false
	}
	r, err := codeRuns(inst.State)
	if err != nil {
		// A state without its runs' record cannot run again: left as it is.
		return false
	}
	for id, st := range inst.State.Steps {
		if st.Status != workflow.StepCompleted {
			delete(inst.State.Steps, id)
		}
	}
	r.Run++
	r.Waiting, r.Error = false, ""
	setCodeRuns(&inst.State, r)
	inst.Deadline = deadline(l.c, now)
	ch.Insert = append(ch.Insert, l.runTask(env, inst, r.Run, now))
	ch.Notify = true
	return true
}

// abort records msg as the error the workflow failed with.
func (code) abort(inst *workflow.Instance, msg string) error {
	r, err := codeRuns(inst.State)
	if err != nil {
		return err
	}
	r.Error = msg
	setCodeRuns(&inst.State, r)
	return nil
}

// Recorded is a step's outcome as the function reports it: its output, or
// (Failed) its error after Attempts attempts.
type Recorded struct {
	Output   json.RawMessage
	Failed   bool
	Error    string
	Attempts int
}

// CheckpointCause is the history cause of recording step name.
func CheckpointCause(name string, failed bool) string {
	if failed {
		return fmt.Sprintf("step %q failed", name)
	}
	return fmt.Sprintf("step %q completed", name)
}

// Checkpoint records the outcome of step name of the run holding lease on
// t. A step already recorded is not written again: the change is empty
// (no version) and entry is the recorded one, which the function must use.
// A name recorded with another kind fails the workflow for good
// (ErrNonDeterminism is then returned with the change that does).
func (env Env) Checkpoint(c *Definition, inst *workflow.Instance, t *store.Task, lease, name string, rec Recorded, now time.Time) (ch Change, entry *workflow.StepState, err error) {
	n, err := env.checkRun(c, inst, t, lease, now)
	if err != nil {
		return Change{}, nil, err
	}
	if err := workflow.ValidateStepKey(name); err != nil {
		return Change{}, nil, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	}
	if st := inst.State.Steps[name]; st != nil {
		if kind := entryKind(st); kind != KindStep {
			return env.nonDeterministic(c, inst, t, n, name, kind, KindStep, now)
		}
		if st.Status == workflow.StepCompleted || st.Status == workflow.StepFailed {
			return Change{}, st, nil
		}
	}
	from := inst.Status
	r, err := codeRuns(inst.State)
	if err != nil {
		return Change{}, nil, err
	}
	r.Seq++
	st := &workflow.StepState{Status: workflow.StepCompleted, Output: rec.Output, Attempts: max(rec.Attempts, 1),
		Extra: entryExtra(KindStep, r.Seq)}
	if rec.Failed {
		st.Status, st.Output, st.Error = workflow.StepFailed, nil, rec.Error
		if strings.TrimSpace(st.Error) == "" {
			st.Error = "failed without an error message"
		}
	} else if len(st.Output) == 0 {
		st.Output = json.RawMessage("null")
	}
	ed := workflow.BeginEdit(&inst.State, env.StateLen, name)
	inst.State.Steps[name] = st
	setCodeRuns(&inst.State, r)
	size, err := env.checkEdit(inst.State, ed)
	if err != nil {
		return Change{}, nil, err
	}
	ch = Change{Cause: CheckpointCause(name, rec.Failed), Edited: ed.Steps(), StateLen: size}
	// The run's row, unchanged, guards the write: a run whose lease moved
	// on since it was read records nothing.
	ch.Update = append(ch.Update, TaskUpdate{Task: *t, Guard: store.GuardOf(t), GuardOnly: true})
	ch.setInstance(inst)
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, nil, err
	}
	return ch, st, nil
}

// checkRun is the fence of a run's own requests: t's current lease, its
// instance running (RUNNING or PAUSED), t its current run. It returns the
// run's number.
func (env Env) checkRun(c *Definition, inst *workflow.Instance, t *store.Task, lease string, now time.Time) (int, error) {
	if err := CheckLease(t, lease, now); err != nil {
		return 0, err
	}
	n, ok := workflow.ParseRunStep(t.StepID)
	if !ok || !c.Def.IsCode() {
		return 0, fmt.Errorf("%w: task %s is a step's task, not the run of a code workflow", store.ErrInvalidArgument, t.ID)
	}
	if err := checkHolder(inst, t); err != nil {
		return 0, err
	}
	return n, nil
}

// nonDeterministic fails the workflow for good: name was recorded as was,
// the code now asks for a want.
func (env Env) nonDeterministic(c *Definition, inst *workflow.Instance, t *store.Task, n int, name, was, want string, now time.Time) (Change, *workflow.StepState, error) {
	msg := NonDeterminismError(name, was, want)
	ch := Change{Cause: fmt.Sprintf("run %d: %s", n, msg)}
	u := *t
	u.Status, u.LastError = store.TaskFailed, msg
	clearLease(&u)
	ch.Update = append(ch.Update, TaskUpdate{Task: u, Guard: store.GuardOf(t)})
	if err := failInstance(c, inst, msg, &ch); err != nil {
		return Change{}, nil, err
	}
	ch.Note = ""
	return ch, nil, fmt.Errorf("%w: %s", ErrNonDeterminism, strings.TrimPrefix(msg, ErrNonDeterminism.Error()+": "))
}

// NonDeterminismError says that step name, recorded as a was, is now asked
// for as a want.
func NonDeterminismError(name, was, want string) string {
	return fmt.Sprintf("non-determinism: step %q was recorded as a %s, and the code now asks for a %s under that name", name, was, want)
}

// entryKind is the kind of a recorded entry.
func entryKind(st *workflow.StepState) string {
	var k string
	if raw, ok := st.Extra["kind"]; ok {
		_ = json.Unmarshal(raw, &k)
	}
	if k == "" {
		return KindStep
	}
	return k
}

func entryExtra(kind string, seq int) map[string]json.RawMessage {
	k, _ := json.Marshal(kind)
	s, _ := json.Marshal(seq)
	return map[string]json.RawMessage{"kind": k, "seq": s}
}

// Wait is one thing a run ends waiting for: a sleep of Sleep, or the
// event Event with Key.
type Wait struct {
	Sleep time.Duration
	Event string
	Key   string
	// Child, when set, is the definition of a child workflow to start
	// with ChildInput, and wait for.
	Child      string
	ChildInput json.RawMessage
	// Timeout, for an event, fails the wait with a timeout error when no
	// event came within it (0: none).
	Timeout time.Duration
}

// timeoutIteration is the row of an event wait's timeout timer: the same
// step as the wait's event task, the next row of it.
const timeoutIteration = 1

// TimeoutError is the error of an event wait whose timeout passed.
func TimeoutError(event string, d time.Duration) json.RawMessage {
	raw, _ := json.Marshal(map[string]string{"type": "timeout", "message": fmt.Sprintf("no event %q came within %s", event, d)})
	return raw
}

func (w Wait) kind() string {
	switch {
	case w.Child != "":
		return KindChild
	case w.Event != "":
		return KindEvent
	}
	return KindSleep
}

// SuspendCause is the history cause of a run that ends waiting.
func SuspendCause(names []string) string {
	return "run waits for " + strings.Join(names, ", ")
}

// Suspend ends the run holding lease on t waiting for waits (by name):
// each not recorded yet is recorded WAITING with its timer or event task
// (a child RUNNING, with the task the engine starts it from); the run
// task is DONE. When one of them has already finished (the function
// awaited it again after an earlier run), the next run is queued in the
// same write. It needs the instance's rows (Env.Tasks; ErrNeedTasks
// without them): a wait retried under its name writes its old rows again.
func (env Env) Suspend(c *Definition, inst *workflow.Instance, t *store.Task, lease string, waits map[string]Wait, now time.Time) (Change, error) {
	n, err := env.checkRun(c, inst, t, lease, now)
	if err != nil {
		return Change{}, err
	}
	if env.Tasks == nil {
		return Change{}, ErrNeedTasks
	}
	if len(waits) == 0 {
		return Change{}, fmt.Errorf("%w: a run waits for at least one thing", store.ErrInvalidArgument)
	}
	from := inst.Status
	r, err := codeRuns(inst.State)
	if err != nil {
		return Change{}, err
	}
	names := slices.Sorted(maps.Keys(waits))
	ch := Change{Cause: SuspendCause(names)}
	finished := false
	for _, name := range names {
		if err := workflow.ValidateStepKey(name); err != nil {
			return Change{}, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
		}
		w := waits[name]
		if st := inst.State.Steps[name]; st != nil {
			if kind := entryKind(st); kind != w.kind() {
				ch, _, err := env.nonDeterministic(c, inst, t, n, name, kind, w.kind(), now)
				return ch, err
			}
			finished = finished || !st.Status.Active()
			continue
		}
		r.Seq++
		st := &workflow.StepState{Status: workflow.StepWaiting, Extra: entryExtra(w.kind(), r.Seq)}
		task := store.Task{ID: env.NewID(), InstanceID: inst.ID, StepID: name, Status: store.TaskQueued, MaxAttempts: 1,
			RunAt: now, Input: json.RawMessage("null"), Flow: workflow.TaskFlow{Priority: inst.Priority}}
		switch {
		case w.Child != "":
			st.Status = workflow.StepRunning
			st.Extra["definition"], _ = json.Marshal(w.Child)
			task.Queue, task.Input = store.QueueChild, w.ChildInput
			if len(task.Input) == 0 {
				task.Input = json.RawMessage("{}")
			}
		case w.Event != "":
			if p := workflow.EventNameProblem(w.Event); p != "" {
				return Change{}, fmt.Errorf("%w: waits.%s.event %s", store.ErrInvalidArgument, name, p)
			}
			waiting, _ := json.Marshal(WaitingFor{Name: w.Event, Key: w.Key})
			st.Extra["event"] = waiting
			task.Queue, task.Input = workflow.EventQueue(w.Event, w.Key), waiting
			if w.Timeout > 0 {
				until := now.Add(w.Timeout)
				st.Extra["timeout_at"], _ = json.Marshal(until.UTC().Format(time.RFC3339Nano))
				timer := task
				timer.ID, timer.Iteration, timer.Queue, timer.RunAt = env.NewID(), timeoutIteration, store.QueueSleep, until
				timer.Input, _ = json.Marshal(map[string]any{"event": w.Event, "timeout": w.Timeout.String()})
				if err := env.putTask(&ch, timer); err != nil {
					return Change{}, err
				}
			}
		default:
			until := now.Add(w.Sleep)
			st.Extra["until"], _ = json.Marshal(until.UTC().Format(time.RFC3339Nano))
			task.Queue, task.RunAt = store.QueueSleep, until
		}
		inst.State.Steps[name] = st
		if err := env.putTask(&ch, task); err != nil {
			return Change{}, err
		}
	}
	done := *t
	done.Status = store.TaskDone
	clearLease(&done)
	ch.Update = append(ch.Update, TaskUpdate{Task: done, Guard: store.GuardOf(t)})
	r.Waiting = true
	setCodeRuns(&inst.State, r)
	if finished {
		if err := (code{c}).wake(env, inst, "", now, &ch); err != nil {
			return Change{}, err
		}
	}
	if err := env.checkSize(inst.State); err != nil {
		return Change{}, err
	}
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// SetCause is the history cause of a run's ctx.set of key.
func SetCause(key string) string { return fmt.Sprintf("variable %q set", key) }

// SetVariable is ctx.set of the run holding lease on t: state.variables.KEY
// = value in one versioned write, guarded by the run's row as read. A
// value equal to the one stored writes nothing (a replay sets it again).
func (env Env) SetVariable(c *Definition, inst *workflow.Instance, t *store.Task, lease, key string, value json.RawMessage, now time.Time) (Change, error) {
	if _, err := env.checkRun(c, inst, t, lease, now); err != nil {
		return Change{}, err
	}
	if err := workflow.ValidateStepKey(key); err != nil || strings.Contains(key, "#") {
		return Change{}, fmt.Errorf("%w: variable %q: 1-128 characters of [A-Za-z0-9._:-]", store.ErrInvalidArgument, key)
	}
	if old, ok := inst.State.Variables[key]; ok && jsonEqual(old, value) {
		return Change{}, nil
	}
	ed := workflow.BeginEdit(&inst.State, env.StateLen)
	if inst.State.Variables == nil {
		inst.State.Variables = map[string]json.RawMessage{}
	}
	inst.State.Variables[key] = value
	n, err := env.checkEdit(inst.State, ed)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Cause: SetCause(key), Edited: ed.Steps(), StateLen: n}
	ch.Update = append(ch.Update, TaskUpdate{Task: *t, Guard: store.GuardOf(t), GuardOnly: true})
	ch.setInstance(inst)
	if err := env.limitVersions(c, inst.Status, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// SearchCause is the history cause of a run's ctx.search of name.
func SearchCause(name string) string { return fmt.Sprintf("search attribute %q set", name) }

// SetSearch is ctx.search of the run holding lease on t: the instance's
// search attribute NAME = value (a string, a number or a boolean) in one
// versioned write, guarded by the run's row as read. A value equal to the
// one the instance shows writes nothing (a replay sets it again).
func (env Env) SetSearch(c *Definition, inst *workflow.Instance, t *store.Task, lease, name string, value json.RawMessage, now time.Time) (Change, error) {
	if _, err := env.checkRun(c, inst, t, lease, now); err != nil {
		return Change{}, err
	}
	if _, err := workflow.CheckSearch(map[string]json.RawMessage{name: value}); err != nil {
		return Change{}, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	}
	if old, ok := inst.Search[name]; ok && jsonEqual(old, value) {
		return Change{}, nil
	}
	ch := Change{Cause: SearchCause(name), Search: map[string]json.RawMessage{name: value}, StateLen: env.StateLen}
	ch.Update = append(ch.Update, TaskUpdate{Task: *t, Guard: store.GuardOf(t), GuardOnly: true})
	ch.setInstance(inst)
	if err := env.limitVersions(c, inst.Status, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
