package store

import (
	"fmt"
	"slices"
	"strings"
)

// The LEASED count of each step concurrency key is a row (key, leased)
// that the stores keep in the transaction of every write that moves a task
// of the key into or out of LEASED. What a write does to the rows is
// decided here, once, from the write's tasks (LeasedChanges); the stores
// only apply the change, guarded (LeasedChange).

// ErrFlowMiss: a guard of a claim's flow control missed — a key's LEASED
// count, a rate bucket, or the instance of a write of tasks with a key
// moved since the claim read them. Nothing of the claim's writes was made
// (a store leaves the claim out, Written false, rather than failing it);
// it errors.Is ErrConflict.
var ErrFlowMiss = fmt.Errorf("%w: a flow-control guard missed", ErrConflict)

// ErrLeasedCount: a write's change to the LEASED count of a step
// concurrency key missed its guard — the key was at its limit (a claim's
// lease: another claim took the slot first), or the count would have gone
// below zero (the row was not kept, which is a fault). Nothing of the write
// was made; it errors.Is ErrFlowMiss and ErrConflict.
var ErrLeasedCount = fmt.Errorf("%w: the LEASED count of a task concurrency key moved", ErrFlowMiss)

// LeasedChange is what a write does to the LEASED count of one step
// concurrency key: Delta tasks of it start (positive) or stop (negative)
// being leased. A store applies it to the key's row as a compare-and-set:
// the count after the change is never below zero, and a change that adds
// leases keeps the count within Limit; a miss fails the write
// (ErrLeasedCount). A key's row is made on its first lease.
type LeasedChange struct {
	Key   string
	Delta int
	// Limit is the concurrency limit of the tasks that add leases (the
	// largest among them when tasks of one key were created with different
	// limits).
	Limit int
}

// LeasedChanges is the rule of the counts: a task of a key (its
// Flow.ConcurrencyLimit above zero) counts while it is LEASED. updates are
// a write's task writes (the row as read is the guard's status, the row as
// written the task's) and leases the tasks a claim leases (QUEUED as
// read); a write's new tasks change no count, as a new task under a key is
// QUEUED (NormaliseNewTask). The changes come one per key whose count
// moves, sorted by key: every writer takes the keys' rows in one order.
// Tasks without a key make none, so a write without keyed tasks has
// nothing to apply.
func LeasedChanges(updates []TaskWrite, leases []*Task) []LeasedChange {
	var out []LeasedChange
	add := func(t *Task, delta int) {
		f := t.Flow
		if f.ConcurrencyLimit <= 0 || delta == 0 {
			return
		}
		i := slices.IndexFunc(out, func(c LeasedChange) bool { return c.Key == f.ConcurrencyKey })
		if i < 0 {
			out = append(out, LeasedChange{Key: f.ConcurrencyKey})
			i = len(out) - 1
		}
		out[i].Delta += delta
		if delta > 0 {
			out[i].Limit = max(out[i].Limit, f.ConcurrencyLimit)
		}
	}
	for _, u := range updates {
		add(u.Task, leasedCount(u.Task.Status)-leasedCount(u.Guard.Status))
	}
	for _, t := range leases {
		add(t, 1)
	}
	if out = slices.DeleteFunc(out, func(c LeasedChange) bool { return c.Delta == 0 }); len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b LeasedChange) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func leasedCount(s TaskStatus) int {
	if s == TaskLeased {
		return 1
	}
	return 0
}

// LeasedCountError is the error of a write whose change to a key's LEASED
// count missed its guard: errors.Is ErrLeasedCount (and ErrConflict).
type LeasedCountError struct{ Key string }

func (e *LeasedCountError) Error() string {
	return fmt.Sprintf("task concurrency key %q: %v", e.Key, ErrLeasedCount)
}

// Unwrap makes errors.Is(err, ErrLeasedCount) true.
func (e *LeasedCountError) Unwrap() error { return ErrLeasedCount }
