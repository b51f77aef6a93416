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
	// QueueChild's tasks start child workflows (workflow steps).
	QueueChild = "flowd:child"
	// Serverless Workflow items: pure tasks and timers (claimable while
	// the instance is RUNNING), http and openapi calls, events to emit.
	QueueTick   = "flowd:tick"
	QueueSWCall = "flowd:swcall"
	QueueSWEmit = "flowd:swemit"
)

// Task is the unit of work the engine schedules for one step of one instance.
// There is at most one task row per (instance, step, iteration): a retry
// re-queues the same row with a new attempt, so no step (or iteration of a
// foreach step) can ever be scheduled twice.
type Task struct {
	ID         string
	InstanceID string
	StepID     string
	// Iteration is 0 for the task of a step without foreach and the item's
	// index plus one for an iteration of a foreach step (so that the zero
	// value is a plain step's task).
	Iteration int
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
	// AttemptTimeout bounds each attempt (0: no bound): a delivery sets
	// AttemptDeadline that long after it (Deliver). It is decided when the
	// task is inserted (the step's timeout) and never changed, so that a
	// claim leases without reading the definition.
	AttemptTimeout time.Duration
	Input          json.RawMessage // rendered step input
	LastError      string
	// Output is the output of a completed iteration of a foreach step,
	// the iteration's own record: the step's record keeps no outputs
	// while it runs, so a completion writes its iteration's output and
	// not every one before it. nil otherwise. A write that leaves it nil
	// keeps the stored one.
	Output    json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// Flow is the flow control the task is claimed under, written when
	// the task is inserted and never changed (see ClaimTasks). A
	// Priority of 0 is stored as workflow.DefaultPriority.
	Flow workflow.TaskFlow
	// Held: the task must not be delivered, whatever its status and RunAt,
	// because of its instance's status (a PAUSED instance's tasks wait,
	// its sleep timers run on). The engine decides it (rules.Held) and sets
	// it on every row a versioned write inserts or updates, and on the
	// active rows of an instance whose status change changes it; a claim
	// takes only tasks that are not held. Writes of task rows alone
	// (Write.TasksOnly) and claims leave the stored value as it is.
	Held bool
}

// Deliver leases t's next attempt to owner under the fencing token lease:
// the attempt is counted, and the lease ends after d or at the attempt's
// deadline (AttemptTimeout after now), whichever comes first, for the
// deadline bounds the attempt whatever the heartbeats. Every delivery —
// a claim's, or a completion's lease of its next task — is made here.
func (t *Task) Deliver(owner, lease string, now time.Time, d time.Duration) {
	t.Attempt++
	t.Status = TaskLeased
	t.Lease, t.LeaseOwner = lease, owner
	t.LeaseUntil = now.Add(d)
	t.AttemptDeadline = time.Time{}
	if t.AttemptTimeout > 0 {
		t.AttemptDeadline = now.Add(t.AttemptTimeout)
		if t.AttemptDeadline.Before(t.LeaseUntil) {
			t.LeaseUntil = t.AttemptDeadline
		}
	}
}

// DeliverForClaim is how a store leases a task its claim p takes: Deliver
// to p.Owner with a fresh lease at p.Now for p.Lease, its times as the
// database keeps them (microseconds) and updatedAt as the row's update
// time.
func (t *Task) DeliverForClaim(p ClaimParams, updatedAt time.Time) {
	t.Deliver(p.Owner, NewID(), p.Now, p.Lease)
	t.LeaseUntil, t.AttemptDeadline, t.UpdatedAt = Timestamp(t.LeaseUntil), Timestamp(t.AttemptDeadline), updatedAt
}

// DefinitionRecord is one stored revision of a workflow definition.
type DefinitionRecord struct {
	Name      string
	Revision  int
	Spec      json.RawMessage // canonical JSON of the definition
	CreatedAt time.Time
}

// TaskQuerier holds the operations on an instance's tasks: reading them,
// reading the work that is due, claiming tasks and the group form of Apply
// that the group commit writes completions and starts with.
type TaskQuerier interface {
	// Task returns the task: a plain read, which locks nothing (a write
	// decided on it guards on what it read). ErrNotFound for an unknown id.
	Task(ctx context.Context, id string) (*Task, error)
	// TasksOfInstance returns the instance's tasks ordered by step id ([]
	// for an instance without tasks, or unknown): a plain read, which
	// locks nothing.
	TasksOfInstance(ctx context.Context, instanceID string) ([]*Task, error)
	// Due reads what the sweeper, the concurrency limits and the event
	// waits have to do, at most p.Limit items of p.Kind (see DueKind),
	// without locking anything: the engine decides each item and writes
	// it with Apply (or Create, ApplyGroup), guarded by what Due read, so
	// that two sweepers never both write one item. A kind that finds
	// nothing returns an empty, non-nil slice. ErrInvalidArgument for an
	// unknown kind or a limit outside 1–MaxBatchLimit.
	Due(ctx context.Context, p DueParams) ([]DueItem, error)
	// ClaimTasks leases up to p.Limit claimable tasks of p.Queues to
	// p.Owner in one transaction — on PostgreSQL two round trips — and
	// returns them, highest Flow.Priority first, then oldest run_at, each
	// with its instance as read in the same transaction (not locked;
	// tasks of one instance share it, and the caller must not change it).
	// A task is claimable when it is QUEUED, not Held, due (run_at <=
	// p.Now) and its flow control lets it go (FlowGate, on its keys'
	// counts and buckets as read: a task whose concurrency key is at its
	// limit or whose rate-limit bucket has no token stays QUEUED, and
	// tasks whose keys were full as last committed are not even locked).
	// Each task is leased as Task.Deliver leases it, at p.Now for p.Lease,
	// under a fresh lease token (NewID): the claim writes task rows and
	// flow rows (the leases' change to their keys' LEASED counts,
	// LeasedChanges, and the buckets taken from), never an instance. It
	// also returns what the keys held back (HeldBack), once the claim has
	// committed: zero with any error, so that a caller acts only on what
	// was written, after the transaction has ended.
	//
	// The flow rows are written guarded by what the claim read: when a
	// guard misses (another claim, on any node, took what this one counted
	// on), nothing is leased and ClaimTasks returns an error wrapping
	// ErrFlowMiss; the caller claims again. Once the writes are sent, a
	// cancelled ctx no longer stops them: a claim that committed must not
	// be reported as failed. When the commit's answer is lost (an error
	// wrapping ErrOutcomeUnknown) it also returns the tasks as they were to
	// be leased: each one stored under the lease given here was claimed.
	// ErrInvalidArgument for parameters ClaimParams.Check refuses.
	ClaimTasks(ctx context.Context, p ClaimParams) ([]Claimable, HeldBack, error)
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
	// version the one before it leaves. The writes of instances that exist
	// before the group are made first, then the creates, then the writes
	// of the instances the group creates (store.GroupOrder): a create may
	// take the concurrency slot a write frees, and a write of a new
	// instance needs it created. It returns the created instances
	// and the instances as written, in order, and fills in the writes'
	// tasks (as Apply does) only when the group is written. Other errors as
	// Create's and Apply's, wrapped with the position of the create or
	// write that caused them.
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
// It locks and leases tasks as ClaimTasks does, its flow rows last, as
// every writer locks them. A miss of its flow control's guards leaves the
// claim out — nothing leased — and the group's creates and writes are
// still committed.
type GroupClaim struct {
	Params ClaimParams
	// Claimed is set by ApplyGroup: the tasks the claim leased, once the
	// group is committed (none when a flow guard missed); when the
	// group's answer is lost, the tasks as they were to be leased (see
	// ClaimTasks): each one stored under the lease given was claimed.
	Claimed []Claimable
	// HeldBack is set by ApplyGroup: what the claim's keys held back, once
	// the group is committed (zero when a flow guard missed or the group
	// failed).
	HeldBack HeldBack
}

// DefinitionStore stores workflow definitions with revisions.
type DefinitionStore interface {
	// PutDefinition stores spec as a new revision of name unless it equals the
	// latest revision, and returns the revision and whether it was created.
	PutDefinition(ctx context.Context, name string, spec json.RawMessage) (rev int, created bool, err error)
	// ListDefinitions returns the latest revision of every definition, by
	// name (bytewise); with p.Name, only that definition's revision
	// p.Revision (0: its latest), or [] when it is not stored (see
	// GetDefinition). ErrInvalidArgument for a Revision without a Name.
	ListDefinitions(ctx context.Context, p ListDefinitionsParams) ([]*DefinitionRecord, error)
	// DeleteDefinition deletes every revision of name in one atomic write,
	// unless an instance of the definition is live (PENDING, QUEUED,
	// RUNNING or PAUSED). The check and the delete are atomic with respect to Create:
	// a concurrent start of the definition either comes first (and the
	// delete fails) or finds no revision (and creates nothing). The highest
	// revision is kept, so a later PutDefinition of name continues after it.
	// Finished instances of the definition stay, naming a revision that is
	// gone. Errors: ErrNotFound; ErrDefinitionInUse (wrapped).
	DeleteDefinition(ctx context.Context, name string) error
}

// ListDefinitionsParams select what ListDefinitions returns.
type ListDefinitionsParams struct {
	Name     string // "" for the latest revision of every definition
	Revision int    // with Name: that revision; 0 for the latest
}

// Check reports parameters ListDefinitions refuses (ErrInvalidArgument).
func (p ListDefinitionsParams) Check() error {
	if p.Name == "" && p.Revision != 0 {
		return fmt.Errorf("%w: a definition revision without a name", ErrInvalidArgument)
	}
	return nil
}

// GetDefinition is ListDefinitions of one name: revision rev of name (0:
// the latest), or an error wrapping ErrNotFound naming what is missing
// (also for a negative rev).
func GetDefinition(ctx context.Context, s DefinitionStore, name string, rev int) (*DefinitionRecord, error) {
	notFound := func() error {
		if rev == 0 {
			return fmt.Errorf("definition %q: %w", name, ErrNotFound)
		}
		return fmt.Errorf("definition %q revision %d: %w", name, rev, ErrNotFound)
	}
	if name == "" || rev < 0 {
		return nil, notFound()
	}
	list, err := s.ListDefinitions(ctx, ListDefinitionsParams{Name: name, Revision: rev})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, notFound()
	}
	return list[0], nil
}

// Counter counts instances, for the flowd_workflows gauges and for the
// checks that need to know whether a database holds any.
type Counter interface {
	// CountInstances returns the counts p asks for, each from one
	// grouped read (the status index covers both): with p.ByStatus how
	// many instances have each status, with p.Queued how many QUEUED
	// instances with a concurrency key each definition has. Statuses and
	// definitions without instances are absent; a count not asked for is
	// nil.
	CountInstances(ctx context.Context, p CountParams) (InstanceCounts, error)
}

// CountByStatus is c.CountInstances asked for the counts by status only.
func CountByStatus(ctx context.Context, c Counter) (map[workflow.Status]int64, error) {
	counts, err := c.CountInstances(ctx, CountParams{ByStatus: true})
	return counts.ByStatus, err
}

// CountParams select the counts of Counter.CountInstances.
type CountParams struct {
	ByStatus bool
	Queued   bool
}

// InstanceCounts are the counts Counter.CountInstances read.
type InstanceCounts struct {
	// ByStatus counts instances per status.
	ByStatus map[workflow.Status]int64
	// Queued counts, per definition, the instances waiting QUEUED for a
	// slot of its concurrency limit.
	Queued map[string]int64
}

// Listener is implemented by stores whose other processes can wake this one
// (PostgreSQL LISTEN/NOTIFY): every Notify committed anywhere sends on the
// returned channel (coalesced) until ctx ends.
type Listener interface {
	Listen(ctx context.Context) (<-chan struct{}, error)
}

// ClaimParams selects the tasks ClaimTasks leases — claimable tasks of
// Queues at Now, at most Limit of them — and whom to: Owner, for Lease.
type ClaimParams struct {
	Queues []string
	Now    time.Time
	Limit  int
	Owner  string
	Lease  time.Duration
}

// Check reports parameters a claim refuses (ErrInvalidArgument): a limit
// outside 1–MaxBatchLimit, more than MaxClaimQueues queues, no owner or a
// lease that is not positive.
func (p ClaimParams) Check() error {
	switch {
	case p.Limit < 1 || p.Limit > MaxBatchLimit:
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxBatchLimit)
	case len(p.Queues) > MaxClaimQueues:
		return fmt.Errorf("%w: %d queues, at most %d may be claimed from at once", ErrInvalidArgument, len(p.Queues), MaxClaimQueues)
	case p.Owner == "":
		return fmt.Errorf("%w: a claim without an owner", ErrInvalidArgument)
	case p.Lease <= 0:
		return fmt.Errorf("%w: a claim's lease of %s is not positive", ErrInvalidArgument, p.Lease)
	}
	return nil
}

// Claimable is a task a claim leased, with its instance as read in the
// same transaction (not locked: the lease is the task's guard). Tasks of
// one instance share the Instance; it must not be changed.
type Claimable struct {
	Task     *Task
	Instance *workflow.Instance
}

// DueKind is what a sweep reads with TaskQuerier.Due.
type DueKind int

// The kinds of due work. Every item carries the instance as read; task
// items the task too.
const (
	// DueTimeouts are RUNNING or PAUSED instances whose deadline is before
	// Now, the oldest deadline first (DueItem.Task is nil).
	DueTimeouts DueKind = iota + 1
	// DueLeases are LEASED tasks whose lease ended before Now, the longest
	// ended first, with their instance.
	DueLeases
	// DueAbandoned are child workflows that still run (PENDING, QUEUED,
	// RUNNING or PAUSED) whose parent no longer does (COMPLETED, FAILED,
	// CANCELLED or TIMED_OUT), with DueItem.Task nil: nothing waits for
	// them any more. Cancelling them makes their own children due, so a
	// sweep reaches every descendant of a cancelled workflow, level by
	// level, on any node and after any restart.
	DueAbandoned
	// DueQueued are QUEUED instances that may start now (DueItem.Task is
	// nil): for each concurrency key with QUEUED instances (only
	// Definition's key Key when Definition is set), its oldest ones
	// (created_at, then id), as many as the key has free slots, oldest
	// first. The write that starts one is checked against the limit as
	// every write is (see ConcurrencySlot).
	DueQueued
	// DueHolder is the oldest RUNNING instance (created_at, then id) of
	// Definition's concurrency key Key: at most one item, with
	// DueItem.Task nil, whatever Limit.
	DueHolder
	// DueWaiters are the QUEUED tasks of Queue (an event queue, see
	// EventQueue), oldest run_at first: the waiters an event published now
	// completes. DueItem.Instance is nil.
	DueWaiters
	// DueEventWaiters are QUEUED tasks of event queues that an event could
	// complete — some event of their queue was created at or after both
	// Since and their instance's creation — and that were last written
	// before WrittenBefore. It is the sweeper's safety net for a waiter
	// whose own look-up never ran. DueItem.Instance is nil.
	DueEventWaiters
	// DueEvent is the oldest event (created_at, then id) of Queue created
	// at or after Since: at most one item, with DueItem.Event set (and
	// Instance and Task nil), whatever Limit. It is the event a waiter
	// that starts waiting now takes.
	DueEvent
)

// DueParams are the inputs of TaskQuerier.Due; each kind reads the
// fields its doc names (see DueKind).
type DueParams struct {
	Kind  DueKind
	Now   time.Time
	Limit int // 1–MaxBatchLimit
	// Definition and Key name one concurrency key (DueQueued: "" for
	// every key; DueHolder).
	Definition string
	Key        string
	// Queue is the event queue of DueWaiters and DueEvent.
	Queue string
	// Since bounds the events of DueEventWaiters and DueEvent;
	// WrittenBefore the tasks of DueEventWaiters.
	Since         time.Time
	WrittenBefore time.Time
}

// Check reports parameters Due refuses (ErrInvalidArgument).
func (p DueParams) Check() error {
	if p.Kind < DueTimeouts || p.Kind > DueEvent {
		return fmt.Errorf("%w: unknown kind of due work %d", ErrInvalidArgument, int(p.Kind))
	}
	if p.Limit < 1 || p.Limit > MaxBatchLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxBatchLimit)
	}
	return nil
}

// DueItem is one item of due work, as read: an instance, and for the kinds
// of tasks one of its tasks (for DueWaiters and DueEventWaiters the task
// only; for DueEvent an event only). Items of one instance may share the
// Instance; a caller that changes it changes it for all of them.
type DueItem struct {
	Instance *workflow.Instance
	Task     *Task
	Event    *Event
}

// InstanceItems are the due items of insts.
func InstanceItems(insts []*workflow.Instance) []DueItem {
	items := make([]DueItem, len(insts))
	for i, inst := range insts {
		items[i].Instance = inst
	}
	return items
}

// DueInstances are the instances of items.
func DueInstances(items []DueItem) []*workflow.Instance {
	insts := make([]*workflow.Instance, len(items))
	for i, it := range items {
		insts[i] = it.Instance
	}
	return insts
}

// DueTasks are the tasks of items.
func DueTasks(items []DueItem) []*Task {
	tasks := make([]*Task, len(items))
	for i, it := range items {
		tasks[i] = it.Task
	}
	return tasks
}

// TaskItems are the due items of tasks read without their instance.
func TaskItems(tasks []*Task) []DueItem {
	items := make([]DueItem, len(tasks))
	for i, t := range tasks {
		items[i].Task = t
	}
	return items
}

// GroupOrder says which of a group's writes are made before its creates:
// before[i] is false for a write of an instance that one of the creates
// makes (it needs the instance created), true for every other (a create
// may need the concurrency slot such a write frees).
func GroupOrder(creates []CreateParams, writes []*Write) (before []bool) {
	created := make(map[string]bool, len(creates))
	for _, p := range creates {
		if p.ID != "" {
			created[p.ID] = true
		}
	}
	before = make([]bool, len(writes))
	for i, w := range writes {
		before[i] = w == nil || !created[w.ID]
	}
	return before
}
