package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Events. A wait step with an event waits as a QUEUED task in the event's
// queue (store.EventQueue), written with the step's WAITING status; no
// worker claims such a queue. Publishing and starting to wait both commit
// first and look the other side up afterwards:
//
//   - PublishEvent stores the event, then delivers it to every task queued
//     in its queue;
//   - a write that queues an event task (takeEvents, after its commit)
//     looks up the oldest stored event of that queue the step may take and
//     delivers it.
//
// Under read committed each look-up sees everything committed before it
// began, so of a publish and a step starting to wait at the same moment
// on two nodes, at least one sees the other: no event is missed. Both
// may see each other; a delivery is one guarded write (the task must
// still be QUEUED), so only one completes the step. The sweeper's pass
// (sweepEventWaits) is the safety net for a node that died, or whose
// look-up failed, between its commit and its look-up.

// DefaultEventRetention is Config.EventRetention when it is 0.
const DefaultEventRetention = 24 * time.Hour

// eventPage is how many waiting tasks one read of a publish returns.
const eventPage = 1000

// eventGrace is how long after a waiting task's write the sweeper leaves
// it to the writer's own look-up before it looks up events for it.
const eventGrace = 5 * time.Second

// PublishedEvent is an event as published, with the instances whose steps
// it completed and the steps it could not be delivered to.
type PublishedEvent struct {
	Event     *store.Event
	Delivered []string
	// ExpiresAt is when the event is swept: until then a wait step that
	// starts waiting later takes it (Config.EventRetention after it was
	// published).
	ExpiresAt time.Time
	// Failed are the steps that took the event but failed instead of
	// completing: it could not be recorded (their instance's state would
	// be larger than its limit with the event's data).
	Failed []UndeliveredEvent
}

// UndeliveredEvent is a waiting step that an event failed instead of
// completing, and why.
type UndeliveredEvent struct {
	WorkflowID string
	Step       string
	Error      string
}

// PublishEvent stores the event (name, key, data) and then completes every
// step waiting for it, each in its own versioned write, before it returns:
// Delivered lists their instances (one entry per step completed). A step
// that takes it but cannot record it (its state would be too large)
// fails, with an error saying why, and is listed in Failed. A name
// that workflow.EventNameProblem refuses, a key longer than
// workflow.MaxEventKeyLength, or data that is not JSON is
// store.ErrInvalidArgument; nothing is stored then. An error delivering
// is returned after the event is stored: the waiters it did not reach
// take it from the store (when they start waiting again, or through the
// sweeper), so a caller may report the event as published.
func (e *Engine) PublishEvent(ctx context.Context, name, key string, data json.RawMessage) (*PublishedEvent, error) {
	return e.publishEvent(ctx, &store.Event{Name: name, Key: key, Data: data})
}

// publishEvent stores ev (under its id, when it has one) and delivers it to
// every step waiting for it.
func (e *Engine) publishEvent(ctx context.Context, ev *store.Event) (*PublishedEvent, error) {
	if msg := workflow.EventNameProblem(ev.Name); msg != "" {
		return nil, fmt.Errorf("%w: name %s", store.ErrInvalidArgument, msg)
	}
	if utf8.RuneCountInString(ev.Key) > workflow.MaxEventKeyLength {
		return nil, fmt.Errorf("%w: key is longer than %d characters", store.ErrInvalidArgument, workflow.MaxEventKeyLength)
	}
	if err := e.st.PublishEvent(ctx, ev); err != nil {
		return nil, err
	}
	if e.m != nil {
		e.m.EventsPublished.Inc()
	}
	out := &PublishedEvent{Event: ev, Delivered: []string{}, Failed: []UndeliveredEvent{}, ExpiresAt: ev.CreatedAt.Add(e.eventRetention)}
	seen := map[string]bool{}
	for {
		waiters, err := e.st.Due(ctx, store.DueParams{Kind: store.DueWaiters, Queue: ev.Queue(), Limit: eventPage})
		if err != nil {
			return out, fmt.Errorf("event %s stored; finding its waiters: %w", ev.ID, err)
		}
		tasks := store.DueTasks(waiters)
		fresh := 0
		for _, t := range tasks {
			if seen[t.ID] {
				continue
			}
			seen[t.ID], fresh = true, fresh+1
			ok, failure, err := e.deliverEvent(ctx, ev, t)
			if err != nil {
				return out, fmt.Errorf("event %s stored; delivering it to workflow %s: %w", ev.ID, t.InstanceID, err)
			}
			switch {
			case failure != "":
				out.Failed = append(out.Failed, UndeliveredEvent{WorkflowID: t.InstanceID, Step: t.StepID, Error: failure})
			case ok:
				out.Delivered = append(out.Delivered, t.InstanceID)
			}
		}
		// A full page may hold tasks that did not take the event (their
		// instance is newer than it): read on while pages bring new ones.
		if len(tasks) < eventPage || fresh == 0 {
			return out, nil
		}
	}
}

// deliverEvent completes t's step with ev, when it still takes it (see
// rules.Env.CompleteByEvent), and reports whether it did. When the step
// takes it but the instance's state would be too large with its data, the
// step fails instead (rules.Env.FailByEvent) and failure says why. A task
// or instance that is gone, or a step that no longer takes the event, is
// skipped; a write that conflicts is decided again on a fresh read.
func (e *Engine) deliverEvent(ctx context.Context, ev *store.Event, t *store.Task) (delivered bool, failure string, err error) {
	rev := rules.Event{ID: ev.ID, Name: ev.Name, Key: ev.Key, Data: ev.Data, CreatedAt: ev.CreatedAt}
	var written *workflow.Instance
	err = e.withDefs(ctx, func() error {
		var err error
		written, _, _, err = e.readDecideApply(ctx, about(t.InstanceID), func(q store.Querier, now time.Time) (*decided, error) {
			failure = ""
			row, err := q.Task(ctx, t.ID)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			inst, err := q.Get(ctx, row.InstanceID)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			if inst.Definition == "" {
				return nil, nil
			}
			c, err := e.definitionOf(inst)
			if err != nil {
				return nil, err
			}
			v := *row
			// The rules change inst: the state as read is kept for a
			// second decision and for the history of the change.
			prior := inst.State.Clone()
			d := &decided{id: inst.ID, version: inst.Version, from: inst.Status, read: byID(row), prior: &prior}
			env := e.rulesFor(ctx)
			d.ch, err = env.CompleteByEvent(c, inst, &v, rev, now)
			var big *workflow.StateTooLargeError
			if errors.As(err, &big) {
				failure = rules.EventTooLargeError(rev, big.Size, big.Max)
				inst.State, inst.Status = prior.Clone(), d.from
				d.ch, err = env.FailByEvent(c, inst, &v, rev, failure, now)
			}
			if errors.Is(err, rules.ErrEventNotTaken) {
				return nil, nil
			}
			return d, err
		})
		return err
	})
	if err != nil || written == nil {
		return false, "", err
	}
	if failure != "" {
		e.log.Warn("event not delivered: the waiting step failed", "event", ev.ID, "name", ev.Name, "workflow", t.InstanceID, "step", t.StepID, "err", failure)
		return false, failure, nil
	}
	if e.m != nil {
		e.m.EventsDelivered.Inc()
	}
	e.log.Debug("event delivered", "event", ev.ID, "name", ev.Name, "workflow", t.InstanceID, "step", t.StepID)
	return true, "", nil
}

// takeEvents is what a write that committed does next when it queued
// tasks in event queues: each such step takes the oldest stored event it
// may take, if there is one. inst is the instance as written (nil when
// the caller does not have it). Errors are logged, not returned: the
// write they follow is committed, and the sweeper's pass catches up.
func (e *Engine) takeEvents(ctx context.Context, inst *workflow.Instance, w *store.Write) {
	if w == nil {
		return
	}
	var waits []*store.Task
	for _, t := range w.Insert {
		if t.Status == store.TaskQueued && rules.IsEventQueue(t.Queue) {
			waits = append(waits, t)
		}
	}
	for _, u := range w.Update {
		if u.Task.Status == store.TaskQueued && rules.IsEventQueue(u.Task.Queue) {
			waits = append(waits, u.Task)
		}
	}
	e.takeEventsFor(ctx, inst, waits)
}

// takeEventsFor delivers to each of waits, tasks of one instance queued in
// event queues, the oldest event it may take.
func (e *Engine) takeEventsFor(ctx context.Context, inst *workflow.Instance, waits []*store.Task) {
	if len(waits) == 0 {
		return
	}
	if inst == nil || inst.CreatedAt.IsZero() {
		var err error
		if inst, err = e.st.Get(ctx, waits[0].InstanceID); err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				e.log.Warn("looking up events for a waiting step", "workflow", waits[0].InstanceID, "err", err)
			}
			return
		}
	}
	for _, t := range waits {
		if err := e.takeOldestEvent(ctx, inst, t); err != nil {
			e.log.Warn("delivering a stored event to a waiting step", "workflow", t.InstanceID, "step", t.StepID, "err", err)
		}
	}
}

// takeOldestEvent delivers to t the oldest event of its queue published
// since its instance was created and within the event retention.
func (e *Engine) takeOldestEvent(ctx context.Context, inst *workflow.Instance, t *store.Task) error {
	since := e.clock().Add(-e.eventRetention)
	if inst.CreatedAt.After(since) {
		since = inst.CreatedAt
	}
	oldest, err := e.st.Due(ctx, store.DueParams{Kind: store.DueEvent, Queue: t.Queue, Since: since, Limit: 1})
	if err != nil || len(oldest) == 0 {
		return err
	}
	_, _, err = e.deliverEvent(ctx, oldest[0].Event, t)
	return err
}

// eventSweepBatch bounds the waiting tasks one pass of the safety net, and
// the expired events one delete, handle.
const eventSweepBatch = 1000

// sweepEventWaits is the sweeper's safety net: waiting tasks, written more
// than eventGrace ago, for which a stored event exists that they may take
// (a node died, or its look-up failed, between the commit of the wait and
// its look-up) get it now.
func (e *Engine) sweepEventWaits(ctx context.Context) error {
	now := e.clock()
	waiters, err := e.st.Due(ctx, store.DueParams{Kind: store.DueEventWaiters,
		Since: now.Add(-e.eventRetention), WrittenBefore: now.Add(-eventGrace), Limit: eventSweepBatch})
	if err != nil {
		return fmt.Errorf("finding waiting steps with events: %w", err)
	}
	for _, w := range waiters {
		e.takeEventsFor(ctx, nil, []*store.Task{w.Task})
	}
	return nil
}

// deleteExpiredEvents deletes the events older than the event retention,
// in batches: a late waiter no longer takes them.
func (e *Engine) deleteExpiredEvents(ctx context.Context) error {
	before := e.clock().Add(-e.eventRetention)
	for range keySweepRounds {
		pruned, err := e.st.Prune(ctx, store.PruneParams{Kind: store.PruneEvents, Before: before, Limit: eventSweepBatch})
		if err != nil {
			return fmt.Errorf("deleting expired events: %w", err)
		}
		n := pruned.Count
		if e.m != nil {
			e.m.EventsExpired.Add(float64(n))
		}
		if n < eventSweepBatch {
			break
		}
	}
	return nil
}
