package rules

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Change is what one decision writes, atomically.
type Change struct {
	// Status, State and Deadline are the instance as the write leaves it
	// (the same maps as the instance the decision was given).
	Status   workflow.Status
	State    workflow.State
	Deadline *time.Time
	// Cause is the history cause of the new version ("" when the caller
	// names it: an action's or a transition's own cause).
	Cause string
	// Settled, when set, is a second version in the same write: the
	// instance had nothing left to run when it was resumed or retried, so it
	// moves from Status to Settled at once (PAUSED → COMPLETED is not a
	// transition of its own). SettledCause is its history cause.
	Settled      workflow.Status
	SettledCause string
	// Insert are new tasks; Update are existing ones to write back.
	Insert []store.Task
	Update []TaskUpdate
	// Next, when set, points into Insert: a task leased in the same write to
	// the worker whose completion scheduled it.
	Next *store.Task
	// Output, when set, is the output of an instance the write completes.
	Output []byte
	// Search, when set, are search attributes the write sets (a code
	// workflow's ctx.search; store.Write.Search).
	Search map[string]json.RawMessage
	// Note, when set, is added to the history cause of the version that
	// ends the write (Cause, or SettledCause): why a completion failed the
	// instance instead (its output did not render).
	Note string
	// Withdrawn are the steps a `join: first` withdrew whose task rows the
	// decision was not given: the caller reads them and cancels their
	// active tasks in the same write (CancelWithdrawn).
	Withdrawn []string
	// Notify: some task became claimable, so workers (of every node) must
	// look for work once the write is committed.
	Notify bool
	// LeasesOnly: the change leases tasks (Update) and writes no version of
	// the instance (Status, State and Cause are unset): a delivery of
	// iterations of foreach steps.
	LeasesOnly bool
	// Edited, when not nil, names every step whose record State puts
	// differently from the instance the decision was given; the others
	// are its records. StateLen, when not 0, is the length of State's
	// stored form. Both are known to decisions that change a few records
	// (store.Write.Changed, StateLen).
	Edited   []string
	StateLen int
}

// setInstance records inst as the write leaves it.
func (ch *Change) setInstance(inst *workflow.Instance) {
	ch.Status, ch.State, ch.Deadline = inst.Status, inst.State, inst.Deadline
}

// claimable reports whether the change queues a task some worker has to
// claim: a task leased in the same write needs no wake-up, and no worker
// claims a task waiting for an event.
func (ch *Change) claimable() bool {
	for i := range ch.Insert {
		if ch.Insert[i].Status == store.TaskQueued && !IsEventQueue(ch.Insert[i].Queue) {
			return true
		}
	}
	for i := range ch.Update {
		if t := &ch.Update[i].Task; t.Status == store.TaskQueued && !IsEventQueue(t.Queue) {
			return true
		}
		// A task under a concurrency key that is no longer leased frees a
		// slot: a task its key held back can be claimed now.
		if t := &ch.Update[i].Task; t.Flow.ConcurrencyLimit > 0 && t.Status != store.TaskLeased {
			return true
		}
	}
	return false
}

// Env is what the rules take from the world besides data: fresh ids (task
// ids, lease tokens), the jitter of retry backoff, and the bound of a
// stored state. Injected, so that decisions are deterministic under test.
type Env struct {
	NewID func() string
	// Jitter returns a number in [0, 1): the random part of a backoff.
	Jitter func() float64
	// MaxStateBytes bounds the state a start or a completion writes (0:
	// no bound); a larger one is refused with workflow.ErrStateTooLarge.
	MaxStateBytes int

	// Docs bounds the documents the decisions of a node decode at once
	// for their expressions (nil: no bound): one gate for every decision
	// of the node.
	Docs *workflow.DocGate

	// Ctx, when set, is the caller's context: it bounds the evaluation of
	// expressions (besides workflow.ExprTimeout).
	Ctx context.Context
	// Tasks, when the caller read them, are the instance's task rows by
	// TaskKey, for the decisions of a lease holder that need the rows of
	// other iterations of its step (ErrNeedTasks without them).
	Tasks map[string]*store.Task

	// MaxVersions bounds the versions of an instance (limits.go): the
	// decision that would leave no room for more fails it instead (0: no
	// bound).
	MaxVersions int

	// StateLen, when the caller knows it, is the length of the stored
	// form of the state of the instance a decision is given (the length
	// the write that stored it worked out; 0: not known). A decision that
	// changes a few records (a checkpoint, a set) then measures the state
	// from it instead of encoding all of it.
	StateLen int
}

func (env Env) checkSize(s workflow.State) error { return s.CheckSize(env.MaxStateBytes) }

// checkEdit is checkSize of a state changed within ed, measured from its
// length before when that is known. It returns the new length (0: not
// known).
func (env Env) checkEdit(s workflow.State, ed workflow.Edit) (int, error) {
	n := ed.End()
	if n == 0 {
		return 0, env.checkSize(s)
	}
	return n, workflow.CheckLen(n, env.MaxStateBytes)
}
