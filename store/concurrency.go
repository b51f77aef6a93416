package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/workflow"
)

// ErrConcurrencyLimit: a write would have moved an instance into a status
// that holds a slot of its concurrency key (workflow.Status.HoldsSlot) while
// the key's slots were all held (or, for a new instance, while older
// instances of the key wait QUEUED): nothing was written. It is not a
// conflict: writing again changes nothing until a slot frees.
var ErrConcurrencyLimit = errors.New("concurrency limit reached")

// ConcurrencySlot is the concurrency key of an instance of a definition
// with a concurrency limit: the key as rendered at its start and the limit
// of its definition's revision. The key is scoped to the definition: two
// definitions with the same key do not share slots.
type ConcurrencySlot struct {
	Key   string
	Limit int
}

// Check reports a slot the store refuses (ErrInvalidArgument).
func (s *ConcurrencySlot) Check() error {
	if s != nil && s.Limit < 1 {
		return fmt.Errorf("%w: concurrency limit %d is below 1", ErrInvalidArgument, s.Limit)
	}
	return nil
}

// ConcurrencyLimitError is the error of a write refused by the slot guard:
// errors.Is ErrConcurrencyLimit.
type ConcurrencyLimitError struct {
	ID string
	// Detail is the database's account of it (the key and the limit).
	Detail string
}

func (e *ConcurrencyLimitError) Error() string {
	return fmt.Sprintf("workflow %s: %s: %s", e.ID, ErrConcurrencyLimit, e.Detail)
}

// Is makes errors.Is(err, ErrConcurrencyLimit) true.
func (e *ConcurrencyLimitError) Is(target error) bool { return target == ErrConcurrencyLimit }

// ConcurrencyQuerier reads what the engine needs to apply definition
// concurrency limits. The limit itself is enforced by the stores' writes:
// every write that moves an instance with a concurrency slot from a status
// that holds none into RUNNING or PAUSED (Create, Apply, ApplyGroup,
// BatchUpdateStatus) checks, in the same
// transaction and under a lock of the key (PostgreSQL: an advisory
// transaction lock; SQLite: its single writer), that fewer than the limit
// of the key's instances hold one, and a Create of such an instance also
// that none of the key waits QUEUED; otherwise it writes nothing and
// returns a *ConcurrencyLimitError. The check runs at READ COMMITTED only
// (it has to see what the lock's previous holders committed): under a
// stricter isolation such a write is refused with ErrInvalidArgument.
type ConcurrencyQuerier interface {
	// QueuedDue returns QUEUED instances that may start now: for each
	// concurrency key with QUEUED instances (only p.Definition's key p.Key
	// when p.Definition is set), its oldest ones (created_at, then id), as
	// many as the key has free slots, at most p.Limit in all, oldest first.
	// It reads without locks: the write that starts one is checked
	// against the limit as every write is.
	QueuedDue(ctx context.Context, p QueuedParams) ([]*workflow.Instance, error)
	// OldestHolder returns the oldest RUNNING instance (created_at, then
	// id) of definition's concurrency key key, or ErrNotFound.
	OldestHolder(ctx context.Context, definition, key string) (*workflow.Instance, error)
}

// QueuedParams are the inputs of ConcurrencyQuerier.QueuedDue.
type QueuedParams struct {
	Definition string // "" for every key
	Key        string // with Definition
	Limit      int    // 1–MaxBatchLimit
}

// Check reports parameters QueuedDue refuses (ErrInvalidArgument).
func (p QueuedParams) Check() error {
	if p.Limit < 1 || p.Limit > MaxBatchLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxBatchLimit)
	}
	return nil
}
