package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/workflow"
)

// TaskStatus is the status of one task row.
type TaskStatus string

// Task statuses. A task is QUEUED until claimed, LEASED while a worker holds
// it, and ends DONE, FAILED (no attempt left, or failed for good) or CANCELLED
// (its instance left RUNNING/PAUSED, or its step was completed another way).
const (
	TaskQueued    TaskStatus = "QUEUED"
	TaskLeased    TaskStatus = "LEASED"
	TaskDone      TaskStatus = "DONE"
	TaskFailed    TaskStatus = "FAILED"
	TaskCancelled TaskStatus = "CANCELLED"
)

// Active reports whether the task may still be delivered or completed.
func (s TaskStatus) Active() bool { return s == TaskQueued || s == TaskLeased }

// Task queues that the engine serves itself; every other queue is a handler
// name served by in-process handlers or remote workers.
const (
	QueueSleep = "flowd:sleep"
	QueueHTTP  = "flowd:http"
)

// Task is the unit of work the engine schedules for one step of one instance.
// There is at most one task row per (instance, step): a retry re-queues the
// same row with a new attempt, so no step can ever be scheduled twice.
type Task struct {
	ID         string
	InstanceID string
	StepID     string
	// Queue routes the task: a handler name, QueueSleep or QueueHTTP.
	Queue  string
	Status TaskStatus
	// Attempt is the number of the latest attempt delivered (0 before the first
	// claim); MaxAttempts is the attempt number after which no retry is left.
	Attempt     int
	MaxAttempts int
	// RunAt is when the task becomes claimable (backoff, sleep timers).
	RunAt time.Time
	// Lease is the fencing token of the current claim ("" when not leased); a
	// completion must present it. LeaseUntil is when the claim expires;
	// AttemptDeadline (zero = none) bounds the attempt whatever the heartbeats.
	Lease           string
	LeaseOwner      string
	LeaseUntil      time.Time
	AttemptDeadline time.Time
	Input           json.RawMessage // rendered step input
	LastError       string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// LockMode says how a query that locks rows treats rows locked by others.
type LockMode int

// Lock modes. Blocking locks are taken in one order everywhere — tasks first,
// then their instance — and rows that would have to be locked against that
// order are locked with SkipLocked, so two transactions can never wait on each
// other in a cycle.
const (
	LockNone LockMode = iota
	LockWait
	LockSkipLocked
)

// DefinitionRecord is one stored revision of a workflow definition.
type DefinitionRecord struct {
	Name      string
	Revision  int
	Spec      json.RawMessage // canonical JSON of the definition
	CreatedAt time.Time
}

// EngineQuerier holds the operations the engine composes inside WithTx. On
// SQLite every transaction holds the single write lock, so lock modes are
// satisfied trivially.
type EngineQuerier interface {
	// InsertTasks inserts new tasks (ID set by the caller or generated).
	// A task for an (instance, step) that already has one returns ErrExists.
	InsertTasks(ctx context.Context, tasks []*Task) error
	// LockTask returns the task, locked FOR UPDATE (waiting) when inside a
	// transaction. ErrNotFound for an unknown id.
	LockTask(ctx context.Context, id string) (*Task, error)
	// UpdateTask writes every mutable field of t (status, attempt, max attempts,
	// run_at, lease fields, input, last error) and sets UpdatedAt.
	UpdateTask(ctx context.Context, t *Task) error
	// TasksOfInstance returns the instance's tasks, locked per mode.
	TasksOfInstance(ctx context.Context, instanceID string, mode LockMode) ([]*Task, error)
	// LockInstance is Get, and inside a transaction the instance's row stays
	// locked (waiting for other writers) until the transaction ends, so a
	// write decided on what it read cannot conflict. Lock the instance's
	// tasks first (TasksOfInstance with LockWait): tasks, then instance is
	// the lock order of every write.
	LockInstance(ctx context.Context, id string) (*workflow.Instance, error)
	// LockClaimable returns up to limit QUEUED tasks of the given queues with
	// run_at <= now whose instance is RUNNING (or, for QueueSleep, RUNNING or
	// PAUSED), oldest run_at first, locked with SKIP LOCKED. Call it inside
	// WithTx and claim what it returns in the same transaction.
	// ErrInvalidArgument for a limit outside 1–MaxBatchLimit or more than
	// MaxClaimQueues queues.
	LockClaimable(ctx context.Context, queues []string, now time.Time, limit int) ([]*Task, error)
	// ClaimTasks claims tasks in one transaction — on PostgreSQL, called on
	// the store, in two round trips. It locks up to p.Limit claimable tasks
	// of p.Queues as LockClaimable does, reads each one's instance (without
	// locking it) and calls decide with them, oldest run_at first. decide
	// returns the writes to make (see ClaimWrite); ClaimTasks checks them
	// (ErrInvalidArgument, nothing written) and makes them. A write whose
	// instance is no longer at its ExpectedVersion is skipped and its tasks
	// stay queued; the others are made. An error from decide, or any error
	// writing, rolls everything back and is returned (inside WithTx on
	// PostgreSQL, it aborts the caller's transaction). Once the writes are
	// sent, a cancelled ctx no longer stops them: a claim that committed
	// must not be reported as failed.
	ClaimTasks(ctx context.Context, p ClaimParams, decide func([]Claimable) ([]*ClaimWrite, error)) error
	// LockExpired returns up to limit LEASED tasks with lease_until < now,
	// locked with SKIP LOCKED.
	LockExpired(ctx context.Context, now time.Time, limit int) ([]*Task, error)
	// CancelOrphanTasks marks CANCELLED up to limit QUEUED or LEASED tasks whose
	// instance is neither RUNNING nor PAUSED (SKIP LOCKED) and returns how many.
	CancelOrphanTasks(ctx context.Context, limit int) (int, error)
	// TimeOutInstances moves up to limit RUNNING or PAUSED instances whose
	// deadline is before now to TIMED_OUT (oldest deadline first, FOR UPDATE
	// SKIP LOCKED like BatchUpdateStatus, version+1 and a history row each,
	// their RUNNING and WAITING steps CANCELLED) and returns their ids.
	TimeOutInstances(ctx context.Context, now time.Time, limit int) ([]string, error)
	// Notify wakes the workers of every node once the transaction commits
	// (PostgreSQL NOTIFY; a no-op where there is only one process).
	Notify(ctx context.Context) error
	// ApplyGroup writes new instances (each as Create writes it, first
	// tasks included) and writes (each as Applier.Apply writes it) as one
	// atomic write: all of them or none, one round trip on PostgreSQL. Any
	// write that misses — a task guard, the instance's version (a
	// *TaskConflictError or *ConflictError, errors.Is ErrConflict), an
	// unknown instance (ErrNotFound) — or a create that Create would refuse
	// (its id taken, a newer revision under LatestRevision, a used
	// idempotency key) fails the group and nothing of it is written; the
	// caller writes each on its own to learn which. Writes of the same
	// instance must come in the order they apply: each is guarded by the
	// version the one before it leaves. It returns the created instances
	// and the instances as written, in order, and fills in the writes'
	// tasks (as Apply does) only when the group is written. Other errors as
	// Create's and Apply's, wrapped with the position of the create or
	// write that caused them. Inside WithTx the group is part of the
	// caller's transaction (on PostgreSQL a failed group aborts it).
	//
	// With a claim (not nil), the group then claims tasks in the same
	// transaction, as ClaimTasks does (see GroupClaim): a worker whose
	// completion leaves it free gets its next task with that completion's
	// write. On PostgreSQL the group is then two round trips.
	ApplyGroup(ctx context.Context, creates []CreateParams, writes []*Write, claim *GroupClaim) (created, written []*workflow.Instance, err error)
}

// GroupClaim is the claim an ApplyGroup makes after its creates and writes,
// in the same transaction: it sees them (a task a create or write queued can
// be claimed at once) and is written, and reported, with them or not at all.
// It locks tasks as ClaimTasks does and, unlike ClaimTasks, also their
// instances, skipping a task whose instance another transaction holds: its
// writes wait for nobody, so a group holding instance locks of its writes
// cannot deadlock with another one. Decide's error, or a write it returns
// that CheckClaimWrites refuses, fails the group. A write is reported
// (Written, Instance) only once the group is committed; inside WithTx, once
// it is made in the caller's transaction. The rows the claim locks and does
// not write (tasks beyond the limit, an instance whose tasks decide left)
// stay locked until the group's transaction ends.
type GroupClaim struct {
	Params ClaimParams
	Decide func([]Claimable) ([]*ClaimWrite, error)
}

// Check reports a claim ApplyGroup cannot make: no decide function.
func (g *GroupClaim) Check() error {
	if g != nil && g.Decide == nil {
		return fmt.Errorf("%w: group claim without a decide function", ErrInvalidArgument)
	}
	return nil
}

// DefinitionStore stores workflow definitions with revisions.
type DefinitionStore interface {
	// PutDefinition stores spec as a new revision of name unless it equals the
	// latest revision, and returns the revision and whether it was created.
	PutDefinition(ctx context.Context, name string, spec json.RawMessage) (rev int, created bool, err error)
	// GetDefinition returns revision rev of name (0: the latest); ErrNotFound.
	GetDefinition(ctx context.Context, name string, rev int) (*DefinitionRecord, error)
	// ListDefinitions returns the latest revision of every definition, by name.
	ListDefinitions(ctx context.Context) ([]*DefinitionRecord, error)
	// DeleteDefinition deletes every revision of name in one atomic write,
	// unless an instance of the definition is live (PENDING, RUNNING or
	// PAUSED). The check and the delete are atomic with respect to Create:
	// a concurrent start of the definition either comes first (and the
	// delete fails) or finds no revision (and creates nothing). The highest
	// revision is kept, so a later PutDefinition of name continues after it.
	// Finished instances of the definition stay, naming a revision that is
	// gone. Errors: ErrNotFound; ErrDefinitionInUse (wrapped).
	DeleteDefinition(ctx context.Context, name string) error
}

// Counter is implemented by stores that can count instances by status cheaply.
type Counter interface {
	CountByStatus(ctx context.Context) (map[workflow.Status]int64, error)
}

// Listener is implemented by stores whose other processes can wake this one
// (PostgreSQL LISTEN/NOTIFY): every Notify committed anywhere sends on the
// returned channel (coalesced) until ctx ends.
type Listener interface {
	Listen(ctx context.Context) (<-chan struct{}, error)
}

// ClaimParams selects the tasks ClaimTasks locks: as LockClaimable's
// arguments.
type ClaimParams struct {
	Queues []string
	Now    time.Time
	Limit  int
}

// Claimable is a task ClaimTasks locked, with its instance as read in the
// same statement (not locked: a write guards on its version). Tasks of one
// instance share the Instance; decide must not change it.
type Claimable struct {
	Task     *Task
	Instance *workflow.Instance
}

// ClaimWrite is one write of a claim: the leases of claimed tasks of one
// instance and, when SetState, the instance's new state in the same write.
type ClaimWrite struct {
	// Tasks are claimed tasks of one instance, each claimed once, leased:
	// Status LEASED, an Attempt of at least 1, a Lease and a LeaseUntil.
	// Only the lease fields (status, attempt, lease, lease owner, lease
	// until, attempt deadline) are written.
	Tasks []*Task
	// SetState moves the RUNNING instance from ExpectedVersion to State
	// (version +1, a history row with Cause) with the leases; when the
	// instance moved on, nothing of this write is made. Without SetState
	// only the leases are written (a timer changes no state when it is
	// picked up).
	SetState        bool
	ExpectedVersion int64
	State           workflow.State
	Cause           string

	// Written is set by ClaimTasks when the write was made; Instance is
	// then the instance as written (SetState only; its State is State).
	Written  bool
	Instance *workflow.Instance
}

// CheckClaimWrites checks decide's writes against the tasks ClaimTasks
// locked: every task was locked, is claimed once and is leased; the tasks of
// one write belong to one instance; a new state is valid.
func CheckClaimWrites(locked []Claimable, writes []*ClaimWrite) error {
	byID := make(map[string]bool, len(locked))
	for _, c := range locked {
		byID[c.Task.ID] = false
	}
	for i, w := range writes {
		if w == nil || len(w.Tasks) == 0 {
			return fmt.Errorf("%w: claim write %d has no task", ErrInvalidArgument, i+1)
		}
		inst := w.Tasks[0].InstanceID
		for _, t := range w.Tasks {
			seen, ok := byID[t.ID]
			switch {
			case !ok:
				return fmt.Errorf("%w: task %q was not locked by this claim", ErrInvalidArgument, t.ID)
			case seen:
				return fmt.Errorf("%w: task %q is claimed twice", ErrInvalidArgument, t.ID)
			case t.InstanceID != inst:
				return fmt.Errorf("%w: claim write %d leases tasks of workflows %q and %q", ErrInvalidArgument, i+1, inst, t.InstanceID)
			case t.Status != TaskLeased || t.Lease == "" || t.LeaseUntil.IsZero() || t.Attempt < 1:
				return fmt.Errorf("%w: task %q is not leased (status %s, attempt %d, lease %q, until %v)", ErrInvalidArgument, t.ID, t.Status, t.Attempt, t.Lease, t.LeaseUntil)
			}
			byID[t.ID] = true
		}
		if w.SetState {
			if err := w.State.Validate(); err != nil {
				return err
			}
		}
	}
	return nil
}
