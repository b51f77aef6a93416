package store

import (
	"context"
	"fmt"
	"time"
)

// MaxDeleteFinished bounds PruneParams.Limit of PruneInstances: one
// transaction deletes at most this many instances, so a backlog of expired
// instances is worked off in short transactions that hold few locks.
const MaxDeleteFinished = 1000

// PruneKind is what RetentionStore.Prune deletes.
type PruneKind int

// The kinds of rows Prune deletes once their retention has passed.
const (
	// PruneInstances deletes at most Limit (1–MaxDeleteFinished) finished
	// instances (status in workflow.StopStatuses) whose updated_at is
	// before their cutoff (Before, or their definition's in Definitions),
	// each with its descendants, history, tasks and idempotency keys as
	// DeleteInstance deletes them, in one transaction, and returns the ids
	// of all it deleted, descendants included, in Pruned.IDs (empty, not
	// nil, when none is due). An instance with a descendant that has not
	// finished, or that another transaction holds, is left for a later
	// call. Concurrent calls
	// never delete or return the same instance: on PostgreSQL each call
	// skips the rows another holds locked (SKIP LOCKED), so every node may
	// sweep at once without waiting for the others; an instance locked by
	// a writer (a retry making it RUNNING, a DeleteInstance) is left for a
	// later call.
	PruneInstances PruneKind = iota + 1
	// PruneEvents deletes at most Limit (1–MaxEventLimit) events created
	// before Before, oldest first. Concurrent calls on PostgreSQL skip
	// each other's rows.
	PruneEvents
	// PruneIdempotencyKeys deletes at most Limit (1 or more) idempotency
	// keys created before Before, oldest first. Concurrent calls on
	// PostgreSQL skip each other's rows.
	PruneIdempotencyKeys
	// PruneWorkers deletes every worker record whose last poll is before
	// Before (Limit is not used: the registry holds one row per worker
	// and node).
	PruneWorkers
	// PruneBulk deletes at most Limit (1 or more) bulk operations that
	// ended (DONE or CANCELLED) and were last written before Before,
	// oldest first; a RUNNING one is never deleted.
	PruneBulk
)

// PruneParams select what RetentionStore.Prune deletes (see PruneKind).
type PruneParams struct {
	Kind PruneKind
	// Before is the cutoff. For PruneInstances it is the cutoff of
	// free-form instances and of instances of a definition that is not in
	// Definitions, and the zero time keeps them all.
	Before time.Time
	// Definitions (PruneInstances only) maps a definition name to the
	// cutoff of its instances, which replaces Before for them; a zero time
	// keeps them all.
	Definitions map[string]time.Time
	// Limit is the most rows deleted; its bounds depend on Kind.
	Limit int
}

// Pruned is what one RetentionStore.Prune deleted.
type Pruned struct {
	// Count is how many rows it deleted.
	Count int
	// IDs are the ids of the instances PruneInstances deleted (nil for
	// the other kinds).
	IDs []string
}

// Check validates p and returns it with every time as Timestamp (what the
// stores compare with). Errors: ErrInvalidArgument for an unknown kind or
// a limit outside the kind's bounds.
func (p PruneParams) Check() (PruneParams, error) {
	switch p.Kind {
	case PruneInstances:
		if p.Limit < 1 || p.Limit > MaxDeleteFinished {
			return p, fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxDeleteFinished)
		}
	case PruneEvents:
		if err := CheckEventLimit(p.Limit); err != nil {
			return p, err
		}
	case PruneIdempotencyKeys, PruneBulk:
		if p.Limit < 1 {
			return p, fmt.Errorf("%w: limit %d is below 1", ErrInvalidArgument, p.Limit)
		}
	case PruneWorkers:
	default:
		return p, fmt.Errorf("%w: unknown kind of prune %d", ErrInvalidArgument, int(p.Kind))
	}
	q := PruneParams{Kind: p.Kind, Limit: p.Limit}
	if !p.Before.IsZero() {
		q.Before = Timestamp(p.Before)
	}
	if p.Kind == PruneInstances {
		q.Definitions = make(map[string]time.Time, len(p.Definitions))
		for name, t := range p.Definitions {
			if !t.IsZero() {
				t = Timestamp(t)
			}
			q.Definitions[name] = t
		}
	}
	return q, nil
}

// Latest returns the latest of p's cutoffs, and false when every cutoff
// keeps its instances (there is nothing to delete). No instance older than
// it is deleted: stores bound their index scan with it.
func (p PruneParams) Latest() (time.Time, bool) {
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
	// Prune deletes one batch of p.Kind's rows whose retention has passed
	// (see PruneKind) and returns what it deleted. Errors:
	// ErrInvalidArgument (see PruneParams.Check).
	Prune(ctx context.Context, p PruneParams) (Pruned, error)
}
