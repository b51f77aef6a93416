package store

import (
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
//
// The limit is enforced by the stores' writes (see SlotChange): every
// write that makes an instance with a concurrency slot hold one (Create,
// Apply, ApplyGroup) takes it in the key's row of counts with a guarded
// update in the same transaction, or writes nothing and returns a
// *ConcurrencyLimitError.
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
	// Detail says why: the key's slots, its limit and definition, or that
	// older instances of the key wait QUEUED.
	Detail string
}

func (e *ConcurrencyLimitError) Error() string {
	return fmt.Sprintf("workflow %s: %s: %s", e.ID, ErrConcurrencyLimit, e.Detail)
}

// Is makes errors.Is(err, ErrConcurrencyLimit) true.
func (e *ConcurrencyLimitError) Is(target error) bool { return target == ErrConcurrencyLimit }

// SlotChange is what a write does to the counts of its instance's
// concurrency key: Holders and Queued are each -1, 0 or +1. The stores keep
// one row of counts per key (definition and key) and apply a write's change
// to it in the write's transaction, as a compare-and-set: a change that
// adds a holder applies only while the key's holders are below the
// instance's limit (and, for a new instance, while none of the key waits
// QUEUED, so that older ones start first); otherwise nothing is written and
// the write returns a *ConcurrencyLimitError. The row's lock is what makes
// the writers of one key take turns, on every node: the counts never pass
// the limit, not even for a moment. An instance without a concurrency key
// changes no row.
type SlotChange struct{ Holders, Queued int }

// SlotChangeOf is the rule of slots: RUNNING and PAUSED hold one of the
// key's slots (workflow.Status.HoldsSlot), QUEUED waits for one. from is ""
// for a new instance.
func SlotChangeOf(from, to workflow.Status) SlotChange {
	var c SlotChange
	c.Holders = slotCount(to.HoldsSlot()) - slotCount(from.HoldsSlot())
	c.Queued = slotCount(to == workflow.StatusQueued) - slotCount(from == workflow.StatusQueued)
	return c
}

func slotCount(b bool) int {
	if b {
		return 1
	}
	return 0
}

// None reports whether c changes no count.
func (c SlotChange) None() bool { return c == SlotChange{} }

// SlotChange is the change w makes to its instance's key (From to its
// final status; a TasksOnly write changes none).
func (w *Write) SlotChange() SlotChange {
	if w.TasksOnly {
		return SlotChange{}
	}
	return SlotChangeOf(w.From, w.FinalStatus())
}

// SlotChange is the change the create p makes to its key: none without
// one.
func (p *CreateParams) SlotChange() SlotChange {
	if p.Concurrency == nil {
		return SlotChange{}
	}
	return SlotChangeOf("", p.Status)
}
