package rules

import (
	"fmt"
	"time"

	"github.com/flowd/flowd/workflow"
)

// The history causes of definition concurrency limits.
const (
	// QueuedCause is version 0 of an instance created QUEUED.
	QueuedCause = "start: queued, the concurrency key has no free slot"
	// PromoteCause is the version that starts a QUEUED instance.
	PromoteCause = "start: a concurrency slot is free"
	// MadeRoomCause is the cancel of the oldest RUNNING instance of a key
	// by a start under cancel_in_progress.
	MadeRoomCause = "cancel: " + workflow.ConcurrencyLimitCause + ", a newer instance of the key starts"
)

// FreesSlot reports whether a write that moves an instance from from to to
// frees a slot of its concurrency key: after it, the oldest QUEUED
// instances of the key may start.
func FreesSlot(from, to workflow.Status) bool { return from.HoldsSlot() && !to.HoldsSlot() }

// Promote decides the start of a QUEUED instance of c whose key has a free
// slot: what Start decides for a new instance, from QUEUED. An instance that
// fails at once (a first step whose input does not render) is RUNNING and
// then FAILED in the same write (Settled): QUEUED → FAILED is not a
// transition.
func (env Env) Promote(c *Definition, inst *workflow.Instance, now time.Time) (Change, error) {
	if inst.Status != workflow.StatusQueued {
		return Change{}, &NotAllowedError{Msg: fmt.Sprintf("workflow %s is %s: only a QUEUED instance is started when a slot frees", inst.ID, inst.Status)}
	}
	ch, err := env.Start(c, inst, now)
	if err != nil {
		return Change{}, err
	}
	if ch.Status == workflow.StatusFailed {
		ch.Status, ch.Settled, ch.SettledCause = workflow.StatusRunning, workflow.StatusFailed, ch.Cause+ch.Note
		ch.Note = ""
	}
	ch.Cause = PromoteCause
	return ch, nil
}

// QueuedState is the state of an instance created QUEUED: every step of
// c PENDING, nothing scheduled (its first steps are scheduled when it
// starts, Promote) — but for a re-run, whose start decided rerun, the
// records it keeps (COMPLETED), which it starts from when promoted.
func QueuedState(c *Definition, rerun workflow.State) workflow.State {
	st := c.Def.InitialState()
	for id, rec := range rerun.Steps {
		if rec != nil && rec.Status == workflow.StepCompleted {
			st.Steps[id] = rec
		}
	}
	return st
}

// OverLimit is what a start does when the store refused its instance
// RUNNING because its concurrency key had no free slot.
type OverLimit int

// The answers of OverLimitAction.
const (
	// OverLimitQueue: create the instance QUEUED.
	OverLimitQueue OverLimit = iota + 1
	// OverLimitCancel: create the instance and cancel it at once (history
	// cause workflow.ConcurrencyLimitCause).
	OverLimitCancel
	// OverLimitMakeRoom: cancel the key's oldest RUNNING instance and
	// create this one RUNNING, in one transaction.
	OverLimitMakeRoom
)

// OverLimitAction says what a start over the limit does under strategy s.
// cancel_in_progress can only cancel a RUNNING instance: when the key's
// slots are all held by PAUSED ones (none RUNNING) the start queues.
func OverLimitAction(s workflow.ConcurrencyStrategy, runningHolder bool) (OverLimit, error) {
	switch s {
	case "", workflow.ConcurrencyQueue:
		return OverLimitQueue, nil
	case workflow.ConcurrencyCancelNewest:
		return OverLimitCancel, nil
	case workflow.ConcurrencyCancelInProgress:
		if runningHolder {
			return OverLimitMakeRoom, nil
		}
		return OverLimitQueue, nil
	}
	return 0, fmt.Errorf("unknown concurrency strategy %q", s)
}
