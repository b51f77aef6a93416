package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// EventQueuePrefix starts the queue of a wait step's task while it waits
// for an event (workflow.EventQueuePrefix). No worker claims these queues:
// an event, delivered by the engine, completes the task.
const EventQueuePrefix = workflow.EventQueuePrefix

// IsEventQueue reports whether queue is one of an event's waiters.
func IsEventQueue(queue string) bool { return strings.HasPrefix(queue, EventQueuePrefix) }

// ErrEventNotTaken: the step does not take the event (any more): it is not
// WAITING on that event, its task is no longer queued for it, its instance
// stopped, or the event was published before the instance was created.
// Nothing is written; the deliverer moves on.
var ErrEventNotTaken = errors.New("the step does not take this event")

// Event is a published event as a delivery sees it.
type Event struct {
	ID        string
	Name      string
	Key       string
	Data      json.RawMessage
	CreatedAt time.Time
}

// EventCause is the history cause of a step completed by an event.
func EventCause(step string, ev Event) string {
	return fmt.Sprintf("event %q (%s) completed step %q", ev.Name, ev.ID, step)
}

// WaitingFor is what state.steps.S.event shows of the event a wait step
// waits for (its key as rendered), and, once it came, its id.
type WaitingFor struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	ID   string `json:"id,omitempty"`
}

// awaitEvent starts a wait step with an event: it renders the key, records
// in the step's state what it waits for, and queues its task in the
// event's queue (re-queueing the step's row on a retry), where no worker
// claims it: a delivery completes it. The task is written with the step's
// WAITING status, so stopping, retrying and deleting the instance treat it
// as any other task. A key that does not render, or renders longer than
// workflow.MaxEventKeyLength, fails the step at once, like any template.
func (env Env) awaitEvent(c *Definition, inst *workflow.Instance, step *workflow.Step, st *workflow.StepState, prev *store.Task, now time.Time, ch *Change) {
	key, tooLong := "", false
	if t := c.keys[step.ID]; t != nil {
		var err error
		// A key is short (4 bytes a character at most): render no more.
		key, err = t.RenderString(inst.Input, workflow.StepOutputs(inst.State.Steps), 4*workflow.MaxEventKeyLength)
		if err != nil && !errors.Is(err, workflow.ErrRenderTooLarge) {
			st.Status, st.Error = workflow.StepFailed, "key: "+err.Error()
			return
		}
		tooLong = err != nil
	}
	if tooLong || utf8.RuneCountInString(key) > workflow.MaxEventKeyLength {
		st.Status, st.Error = workflow.StepFailed, fmt.Sprintf("key: the rendered key is longer than %d characters", workflow.MaxEventKeyLength)
		return
	}
	waiting, _ := json.Marshal(WaitingFor{Name: step.Event, Key: key})
	if st.Extra == nil {
		st.Extra = map[string]json.RawMessage{}
	}
	st.Extra["event"] = waiting
	st.Error = ""
	queue := workflow.EventQueue(step.Event, key)
	if prev != nil {
		t := *prev
		t.Queue, t.Status, t.RunAt, t.Input = queue, store.TaskQueued, now, waiting
		t.MaxAttempts = t.Attempt + 1
		clearLease(&t)
		t.LastError = ""
		ch.Update = append(ch.Update, TaskUpdate{Task: t})
		return
	}
	ch.Insert = append(ch.Insert, store.Task{
		ID: env.NewID(), InstanceID: inst.ID, StepID: step.ID, Queue: queue, Status: store.TaskQueued,
		MaxAttempts: 1, RunAt: now, Input: waiting,
	})
}

// CompleteByEvent decides the delivery of ev to t, the task of a wait step
// waiting for it: the step completes with the event's data as its output,
// its task is DONE (guarded on being still the QUEUED row read, so an event completes a
// step at most once and two deliveries cannot both win), and the instance
// moves on as after any completion. ErrEventNotTaken when the step does not
// take ev: it is not WAITING, t is not queued in ev's queue, the instance
// is neither RUNNING nor PAUSED, or ev was published before the instance
// was created. A state larger than env.MaxStateBytes is refused.
func (env Env) CompleteByEvent(c *Definition, inst *workflow.Instance, t *store.Task, ev Event, now time.Time) (Change, error) {
	st := inst.State.Steps[t.StepID]
	switch {
	case inst.Status != workflow.StatusRunning && inst.Status != workflow.StatusPaused:
		return Change{}, fmt.Errorf("%w: workflow %s is %s", ErrEventNotTaken, inst.ID, inst.Status)
	case st == nil || st.Status != workflow.StepWaiting:
		return Change{}, fmt.Errorf("%w: step %q of workflow %s is not waiting", ErrEventNotTaken, t.StepID, inst.ID)
	case t.Status != store.TaskQueued || t.Queue != workflow.EventQueue(ev.Name, ev.Key):
		return Change{}, fmt.Errorf("%w: step %q of workflow %s does not wait for event %q with key %q", ErrEventNotTaken, t.StepID, inst.ID, ev.Name, ev.Key)
	case ev.CreatedAt.Before(inst.CreatedAt):
		return Change{}, fmt.Errorf("%w: event %s was published before workflow %s was created", ErrEventNotTaken, ev.ID, inst.ID)
	}
	from := inst.Status
	noteEvent(st, ev)
	ch := Change{Cause: EventCause(t.StepID, ev)}
	if err := c.Language.eventTaken(env, inst, t, ev, now, &ch); err != nil {
		return Change{}, err
	}
	if err := env.checkSize(inst.State); err != nil {
		return Change{}, err
	}
	done := *t
	done.Status = store.TaskDone
	ch.Update = append(ch.Update, TaskUpdate{Task: done, Guard: store.GuardOf(t)})
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// noteEvent records in the step's state.steps.S.event the id of the event
// it took.
func noteEvent(st *workflow.StepState, ev Event) {
	if raw, ok := st.Extra["event"]; ok {
		var w WaitingFor
		if json.Unmarshal(raw, &w) == nil {
			w.ID = ev.ID
			st.Extra["event"], _ = json.Marshal(w)
		}
	}
}

// UndeliveredCause is the history cause of a step that failed because the
// event it took could not be recorded.
func UndeliveredCause(step string, ev Event) string {
	return fmt.Sprintf("event %q (%s) could not be delivered to step %q", ev.Name, ev.ID, step)
}

// EventTooLargeError says why an event was not delivered: with its data
// the instance's state would be size bytes, more than max.
func EventTooLargeError(ev Event, size, max int) string {
	return fmt.Sprintf("event %q (%s) cannot be delivered: with its data the workflow's state would be %d bytes, more than --max-state-bytes (%d)", ev.Name, ev.ID, size, max)
}

// FailByEvent decides an event ev that t's step takes (CompleteByEvent
// accepted it) but that cannot be recorded (reason says why: the state
// would be too large with its data). The step fails with reason, for good:
// a flowd wait step FAILED (and its instance with it while RUNNING), a
// Serverless Workflow's listen task raising a runtime error (its try/catch
// may handle it). t is FAILED, guarded on being still the QUEUED row read, so the step
// is not offered the event again, nor any other.
func (env Env) FailByEvent(c *Definition, inst *workflow.Instance, t *store.Task, ev Event, reason string, now time.Time) (Change, error) {
	st := inst.State.Steps[t.StepID]
	if st == nil || st.Status != workflow.StepWaiting || t.Status != store.TaskQueued {
		return Change{}, fmt.Errorf("%w: step %q of workflow %s is not waiting", ErrEventNotTaken, t.StepID, inst.ID)
	}
	from := inst.Status
	noteEvent(st, ev)
	ch := Change{Cause: UndeliveredCause(t.StepID, ev)}
	if err := c.Language.eventUndelivered(env, inst, t, reason, now, &ch); err != nil {
		return Change{}, err
	}
	failed := *t
	failed.Status, failed.LastError = store.TaskFailed, reason
	ch.Update = append(ch.Update, TaskUpdate{Task: failed, Guard: store.GuardOf(t)})
	ch.setInstance(inst)
	ch.Notify = ch.claimable()
	if err := env.limitVersions(c, from, inst, &ch); err != nil {
		return Change{}, err
	}
	return ch, nil
}
