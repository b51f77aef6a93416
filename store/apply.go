package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/workflow"
	"github.com/flowd/flowd/workflow/instance"
)

// Applier is the one guarded write of a decided change: the engine reads,
// decides without locks, and applies; a guard that no longer holds changes
// nothing and says what moved, so that the engine reads and decides again.
type Applier interface {
	// Apply writes w atomically and conditionally: the instance moves from
	// version w.ExpectedVersion to +1 (+2 with w.Settled), with one history
	// row per version; w.Insert are inserted and every w.Update written, each
	// only while its guard holds. All of it or nothing: when the instance is
	// no longer at w.ExpectedVersion it returns a *ConflictError carrying the
	// actual version, when a task's guard misses a *TaskConflictError (both
	// errors.Is ErrConflict), and nothing is written. A status that stops
	// steps applies workflow.State.CancelActiveSteps to w.State (in place) as
	// every status write does. It returns the instance as written.
	// Other errors: ErrNotFound, ErrInvalidArgument (see Write.Validate),
	// workflow.ErrTerminal (w.From is terminal), workflow.ErrInvalidTransition,
	// workflow.ErrInvalidState, ErrExists (a new task's id or step is taken).
	// On PostgreSQL it is one statement; on SQLite one BEGIN IMMEDIATE
	// transaction.
	//
	// With w.TasksOnly it writes task rows alone (see Write.TasksOnly): no
	// version, no history row, and it returns a nil instance.
	Apply(ctx context.Context, w *Write) (*workflow.Instance, error)

	// ApplyEach makes each write as Apply would, all in one transaction,
	// leaving out those that miss: written[i] is the instance as writes[i]
	// left it, or nil when that write found its instance moved on (its
	// version, its status or a task it guards: what Apply reports as
	// ErrConflict) or gone (ErrNotFound) — it wrote nothing of that one.
	// It is how a batch takes the instances nobody else changed while it
	// decided, without holding any lock meanwhile. Any other error
	// (ErrInvalidArgument, ErrConcurrencyLimit, a database error) writes
	// nothing at all and is returned, wrapped with the position of the write
	// that caused it. The writes are of distinct instances; TasksOnly writes
	// are refused (ErrInvalidArgument). On PostgreSQL it is one round trip.
	ApplyEach(ctx context.Context, writes []*Write) (written []*workflow.Instance, err error)
}

// Write is one decided change of an instance, as Apply writes it.
type Write struct {
	// ID is the instance; ExpectedVersion the version the change was decided
	// on (the guard), From its status at that version.
	ID              string
	ExpectedVersion int64
	From            workflow.Status
	// Status, State and Deadline are the instance as the first new version
	// leaves it, Cause that version's history cause.
	Status   workflow.Status
	State    workflow.State
	Deadline *time.Time
	Cause    string
	// Settled, when set, is a second version in the same write: the same
	// state, this status (SettledCause its history cause).
	Settled      workflow.Status
	SettledCause string
	// Actor, when set, is the actor of the write's history rows in place
	// of the context's (see WriteActor).
	Actor string
	// Output, when set, is the output of an instance the write completes
	// (JSON), stored with the COMPLETED status; nil keeps the stored one.
	Output json.RawMessage
	// Insert are new tasks of the instance (filled in as stored on
	// success); Update are existing ones to write back, each with its guard.
	Insert []*Task
	Update []TaskWrite
	// Now is the engine's clock when it decided the write. The stores no
	// longer read it: a task guard is the row as read, and whether its
	// lease runs at Now was decided before the write.
	Now time.Time
	// Notify wakes the workers of every node once the write is committed.
	Notify bool
	// Prior, when the caller has it, is the instance's state at
	// ExpectedVersion, the state the change was decided on; it is never
	// changed. A backend may use it to store the new version's history as
	// a patch without working out the previous state itself (the engine's
	// frequent writes give it). A Prior that is not that state makes the
	// history wrong: leave it nil when in doubt.
	Prior *workflow.State
	// Changed, when not nil (with Prior), names every step whose record
	// State puts differently from Prior's (new, replaced or deleted);
	// every other step's record is Prior's. A backend then stores and
	// patches those alone, without looking at the others: a write costs
	// its change, not the steps recorded before it.
	Changed []string
	// StateLen, when not 0, is the length of State's stored form
	// (MarshalJSON), which the caller worked out (workflow.Edit): a
	// backend need not encode the whole state to measure it, and the
	// instance it returns may share State's maps (the caller hands them
	// over and changes them no more). On success
	// the backend sets it to the length of the stored form of the state
	// the write leaves (the settled version's, when it settles).
	StateLen int

	// Search, when not empty, sets these search attributes of the
	// instance (a code workflow's ctx.search), each replacing the one of
	// its name, in the same atomic write (Apply only: ApplyGroup and
	// ApplyEach refuse it with ErrInvalidArgument). Checked with
	// workflow/instance.CheckSearch, counting the attributes stored.
	Search map[string]json.RawMessage

	// TasksOnly makes the write one of task rows alone: a heartbeat, a
	// task given back, a timer's lease expiry, the cancel of a task whose
	// step ended change no instance, so they add no version and no history row, and
	// they do not conflict with the instance's other writers. Only ID, From,
	// Update, Now and Notify are used: every Update is a task of instance ID
	// written while its guard holds; From, when set, is the status the
	// instance must still have (a status guard without a version: the
	// write misses, with a *ConflictError, only when the status changed).
	// A TasksOnly write with Insert, a new status or state, a deadline, a
	// cause, a settled version, an expected version or no Update at all is
	// ErrInvalidArgument. It keeps each row's stored held flag, whatever
	// its Task says (see TaskGuard).
	TasksOnly bool
}

// TaskWrite is a task row to write back (every mutable field: status,
// attempt, max attempts, run_at, lease fields, input, last error, and held
// in a versioned write) while its guard holds.
type TaskWrite struct {
	Task  *Task
	Guard TaskGuard
	// GuardOnly: the row is not changed, only needed as it is (a run's
	// lease guarding its checkpoint); it is then the only update of a
	// versioned write. Task is the row as read, equal to its guard; the
	// backend checks the guard and keeps the row from other writers until
	// the commit, without rewriting it (a rewrite would be a new row
	// version and a new entry in each of the table's indexes), and leaves
	// Task as it is.
	GuardOnly bool
}

// TaskGuard is what the stored row must still be for a TaskWrite to apply:
// the row as the caller read it (GuardOf), compared field by field. Every
// delivery changes the attempt and the lease, every completion, release or
// expiry the status, every heartbeat the lease's end: a row equal to the
// one read has not moved, and any concurrent change makes the write miss.
// Whether the lease read may act (running, or ended, at the engine's
// clock) is decided on the row read, before the write; the store only
// compares.
//
// The held flag (Task.Held) is not compared: only versioned writes set it,
// from the status they leave, and they are guarded by the instance's
// version, which every status change moves; writes of task rows alone and
// claims keep the stored flag. So a flag a pause wrote cannot be undone by
// a heartbeat, a give-back or a timer's expiry decided on the row before
// it, and the pause does not make those writes miss.
type TaskGuard struct {
	Status     TaskStatus
	Attempt    int
	Lease      string
	LeaseUntil time.Time // zero: the row has no lease end
}

// GuardOf is the guard of a write of the row t as read: t as it is now.
func GuardOf(t *Task) TaskGuard {
	return TaskGuard{Status: t.Status, Attempt: t.Attempt, Lease: t.Lease, LeaseUntil: t.LeaseUntil}
}

// FinalStatus is the status w leaves the instance in.
func (w *Write) FinalStatus() workflow.Status {
	if w.Settled != "" {
		return w.Settled
	}
	return w.Status
}

// NewVersion is the version w leaves the instance at.
func (w *Write) NewVersion() int64 {
	if w.Settled != "" {
		return w.ExpectedVersion + 2
	}
	return w.ExpectedVersion + 1
}

// Prepare checks what does not need the database — a storable change, the
// transitions the table allows, a valid state, tasks of this instance,
// guarded updates — and applies CancelActiveSteps to w.State when its
// first version stops the instance's steps (the store does the same for
// the settled version's state).
func (w *Write) Prepare() error {
	if w.TasksOnly {
		return w.prepareTasksOnly()
	}
	switch {
	case w.ID == "":
		return fmt.Errorf("%w: write without an instance id", ErrInvalidArgument)
	case w.ExpectedVersion < 0:
		return fmt.Errorf("%w: write of workflow %q at version %d", ErrInvalidArgument, w.ID, w.ExpectedVersion)
	case w.From.Terminal():
		return fmt.Errorf("workflow %q is %s: %w", w.ID, w.From, workflow.ErrTerminal)
	case w.Status != w.From && !workflow.CanTransition(w.From, w.Status):
		return fmt.Errorf("workflow %q: %w: %s → %s", w.ID, workflow.ErrInvalidTransition, w.From, w.Status)
	case w.Settled != "" && !workflow.CanTransition(w.Status, w.Settled):
		return fmt.Errorf("workflow %q: %w: %s → %s", w.ID, workflow.ErrInvalidTransition, w.Status, w.Settled)
	}
	for _, t := range w.Insert {
		if t == nil || t.InstanceID != w.ID {
			return fmt.Errorf("%w: a write inserts tasks of its own instance %q only", ErrInvalidArgument, w.ID)
		}
	}
	if err := w.checkUpdates(); err != nil {
		return err
	}
	if _, err := instance.CheckSearch(w.Search); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if w.Output != nil && (w.FinalStatus() != workflow.StatusCompleted || !json.Valid(w.Output)) {
		return fmt.Errorf("%w: workflow %q: an output is written, as JSON, with the COMPLETED status only", ErrInvalidArgument, w.ID)
	}
	if StopSteps(w.From, w.Status, &w.State) {
		// Records the caller did not name changed.
		w.Changed, w.StateLen = nil, 0
	}
	if w.Changed != nil && w.Prior != nil {
		// The other records are Prior's, valid when they were stored.
		return w.State.ValidateSteps(w.Changed...)
	}
	return w.State.Validate()
}

// checkUpdates checks w.Update: tasks of instance w.ID, each once, each
// guarded.
func (w *Write) checkUpdates() error {
	seen := make(map[string]bool, len(w.Update))
	for _, u := range w.Update {
		switch {
		case u.Task == nil || u.Task.InstanceID != w.ID:
			return fmt.Errorf("%w: a write updates tasks of its own instance %q only", ErrInvalidArgument, w.ID)
		case u.Guard.Status == "":
			return fmt.Errorf("%w: the update of task %q has no guard", ErrInvalidArgument, u.Task.ID)
		case u.Guard.Status == TaskLeased && (u.Guard.Lease == "" || u.Guard.LeaseUntil.IsZero()):
			return fmt.Errorf("%w: the update of task %q guards on a leased row without naming its lease", ErrInvalidArgument, u.Task.ID)
		case seen[u.Task.ID]:
			return fmt.Errorf("%w: task %q is updated twice", ErrInvalidArgument, u.Task.ID)
		case u.GuardOnly && GuardOf(u.Task) != u.Guard:
			return fmt.Errorf("%w: the guard-only update of task %q changes the row", ErrInvalidArgument, u.Task.ID)
		case u.GuardOnly && (len(w.Update) > 1 || w.TasksOnly):
			return fmt.Errorf("%w: a guard-only update of task %q is the only update of a versioned write", ErrInvalidArgument, u.Task.ID)
		}
		seen[u.Task.ID] = true
	}
	return nil
}

// prepareTasksOnly is Prepare for a TasksOnly write: task updates and
// nothing of the instance.
func (w *Write) prepareTasksOnly() error {
	switch {
	case w.ID == "":
		return fmt.Errorf("%w: write without an instance id", ErrInvalidArgument)
	case len(w.Insert) > 0:
		return fmt.Errorf("%w: a tasks-only write of workflow %q inserts no task", ErrInvalidArgument, w.ID)
	case len(w.Update) == 0:
		return fmt.Errorf("%w: a tasks-only write of workflow %q updates no task", ErrInvalidArgument, w.ID)
	case w.ExpectedVersion != 0 || w.Status != "" || w.Deadline != nil || w.Cause != "" ||
		w.Settled != "" || w.SettledCause != "" || w.Output != nil || len(w.Search) > 0 ||
		w.State.Variables != nil || w.State.Steps != nil || w.State.Extra != nil:
		return fmt.Errorf("%w: a tasks-only write of workflow %q changes no instance", ErrInvalidArgument, w.ID)
	case w.From != "" && !w.From.Valid():
		return fmt.Errorf("%w: unknown status %q", ErrInvalidArgument, w.From)
	}
	return w.checkUpdates()
}

// StatusConflict is the conflict of a TasksOnly Apply whose instance is no
// longer in status w.From but in actual.
func (w *Write) StatusConflict(actual workflow.Status) error {
	return &ConflictError{ID: w.ID, Expected: -1, Actual: -1,
		Reason: fmt.Sprintf("the workflow is %s, no longer %s", actual, w.From)}
}

// StopSteps is the rule every status write applies: a change of status to
// one that stops steps (workflow.Status.StopsSteps) leaves no step RUNNING
// or WAITING. It reports whether it changed state.
func StopSteps(from, to workflow.Status, state *workflow.State) bool {
	if from == to || !to.StopsSteps() {
		return false
	}
	return state.CancelActiveSteps()
}

// TaskConflictError is an Apply whose task guard missed: the task moved
// (delivered, completed, released, its lease ended) since it was read, and
// nothing was written. errors.Is ErrConflict.
type TaskConflictError struct {
	InstanceID string
	TaskID     string
}

func (e *TaskConflictError) Error() string {
	return fmt.Sprintf("concurrent modification of workflow %s: task %s is no longer as it was read (moved on, or its lease ended)", e.InstanceID, e.TaskID)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *TaskConflictError) Is(target error) bool { return target == ErrConflict }

// VersionConflict is the conflict of an Apply whose instance is at actual,
// not at w.ExpectedVersion.
func (w *Write) VersionConflict(actual int64) error {
	return &ConflictError{ID: w.ID, Expected: w.ExpectedVersion, Actual: actual}
}

// CheckEach reports the writes of an ApplyEach that the stores refuse
// before writing anything (ErrInvalidArgument): a nil write, a TasksOnly
// write, or two writes of one instance.
func CheckEach(writes []*Write) error {
	seen := make(map[string]bool, len(writes))
	for i, w := range writes {
		switch {
		case w == nil:
			return fmt.Errorf("%w: write %d of %d is nil", ErrInvalidArgument, i+1, len(writes))
		case w.TasksOnly:
			return fmt.Errorf("%w: write %d of %d writes task rows alone", ErrInvalidArgument, i+1, len(writes))
		case seen[w.ID]:
			return fmt.Errorf("%w: write %d of %d is of workflow %s, as an earlier one", ErrInvalidArgument, i+1, len(writes), w.ID)
		}
		seen[w.ID] = true
	}
	if err := CheckNoSearch(writes); err != nil {
		return err
	}
	return nil
}
