package store

import (
	"context"
	"fmt"
	"time"
)

// MaxDeleteFinished bounds DeleteFinishedParams.Limit: one transaction
// deletes at most this many instances, so a backlog of expired instances
// is worked off in short transactions that hold few locks.
const MaxDeleteFinished = 1000

// DeleteFinishedParams select the instances RetentionStore.DeleteFinished
// deletes: finished ones (workflow.StopStatuses) whose updated_at is before
// their cutoff.
type DeleteFinishedParams struct {
	// Before is the cutoff of free-form instances and of instances of a
	// definition that is not in Definitions. The zero time keeps them all.
	Before time.Time
	// Definitions maps a definition name to the cutoff of its instances,
	// which replaces Before for them; a zero time keeps them all.
	Definitions map[string]time.Time
	// Limit is the most instances deleted, 1–MaxDeleteFinished.
	Limit int
}

// Check validates p and returns it with every time as Timestamp (what the
// stores compare updated_at with).
func (p DeleteFinishedParams) Check() (DeleteFinishedParams, error) {
	if p.Limit < 1 || p.Limit > MaxDeleteFinished {
		return p, fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxDeleteFinished)
	}
	q := DeleteFinishedParams{Limit: p.Limit, Definitions: make(map[string]time.Time, len(p.Definitions))}
	if !p.Before.IsZero() {
		q.Before = Timestamp(p.Before)
	}
	for name, t := range p.Definitions {
		if !t.IsZero() {
			t = Timestamp(t)
		}
		q.Definitions[name] = t
	}
	return q, nil
}

// Latest returns the latest of p's cutoffs, and false when every cutoff
// keeps its instances (there is nothing to delete). No instance older than
// it is deleted: stores bound their index scan with it.
func (p DeleteFinishedParams) Latest() (time.Time, bool) {
	latest := p.Before
	for _, t := range p.Definitions {
		if t.After(latest) {
			latest = t
		}
	}
	return latest, !latest.IsZero()
}

// RetentionStore is what the sweeper needs to enforce retention.
type RetentionStore interface {
	// DeleteFinished deletes at most p.Limit finished instances (status in
	// workflow.StopStatuses) whose updated_at is before their cutoff (see
	// DeleteFinishedParams), each with its history, tasks and idempotency
	// key as DeleteInstance deletes them, in one transaction, and returns
	// their ids (empty when none is due). Concurrent calls never delete or
	// return the same instance: on PostgreSQL each call skips the rows
	// another holds locked (SKIP LOCKED), so every node may sweep at once
	// without waiting for the others; an instance locked by a writer (a
	// retry making it RUNNING, a DeleteInstance) is left for a later call.
	// Errors: ErrInvalidArgument (limit outside 1–MaxDeleteFinished).
	DeleteFinished(ctx context.Context, p DeleteFinishedParams) ([]string, error)
}
