package store

import (
	"errors"
	"fmt"
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
//
// The limit is enforced by the stores' writes: every write that moves an
// instance with a concurrency slot from a status that holds none into
// RUNNING or PAUSED (Create, Apply, ApplyGroup, BatchUpdateStatus) checks,
// in the same transaction and under a lock of the key (PostgreSQL: an advisory
// transaction lock; SQLite: its single writer), that fewer than the limit
// of the key's instances hold one, and a Create of such an instance also
// that none of the key waits QUEUED; otherwise it writes nothing and
// returns a *ConcurrencyLimitError. The check runs at READ COMMITTED only
// (it has to see what the lock's previous holders committed): under a
// stricter isolation such a write is refused with ErrInvalidArgument.
//
// What the engine reads to apply the limits are the kinds DueQueued and
// DueHolder of TaskQuerier.Due.
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
