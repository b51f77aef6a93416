// Package store defines flowd's state-store contract: versioned workflow
// instances, their append-only history, and the atomic operations on them.
// Backends live in store/postgres and store/sqlite and both pass the
// conformance suite in store/storetest.
//
// The package owns the contract, its typed errors, the isolation-level enum, the
// transaction helper and update-with-retry. It must not know any SQL dialect: no
// driver type crosses this boundary, and backends map their errors to the ones
// declared here.
package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/workflow"
	"github.com/flowd/flowd/workflow/instance"
)

// Querier holds the operations on instances and their tasks, each atomic on
// its own. None takes a function to run inside its transaction: what needs
// several changes at once is one call (ApplyGroup, ApplyEach), decided
// before it, and what a store decides inside it (a claim's HeldBack) comes
// back in its results, once the transaction has ended.
//
// Every method that changes an instance increases its version by exactly 1 and
// appends one history row in the same transaction, whose actor is
// WriteActor's (the context's, unless the write names its own). Methods
// document the errors they return; test them with errors.Is / errors.As.
//
// Every method that changes an instance's status to one that stops its steps
// (workflow.Status.StopsSteps) applies workflow.State.CancelActiveSteps in
// that same write: no step of a stopped instance shows RUNNING or WAITING.
type Querier interface {
	// Create inserts a new instance at version 0 (history row 0 included).
	// An empty ID gets a server-generated UUIDv7; an invalid client id or state
	// returns an error wrapping workflow.ErrInvalidID / workflow.ErrInvalidState;
	// an existing id returns ErrExists. Status defaults to PENDING.
	// With p.IdempotencyKey, the key is recorded in the same atomic write;
	// a key recorded less than IdempotencyKeyTTL ago writes nothing and
	// returns an *IdempotencyKeyError (errors.Is ErrIdempotencyKeyUsed). Of
	// concurrent creates with one key, exactly one creates. On PostgreSQL a
	// keyed create whose id is taken fails its statement.
	Create(ctx context.Context, p CreateParams) (*workflow.Instance, error)

	// Get returns the instance as stored, or ErrNotFound: what a write is
	// decided on. A step's attempts count the attempts ended (or leased by
	// the write that scheduled the step), never one a claim leased since.
	// Get, GetWithAttemptsInFlight and List return the instance's search
	// attributes (Instance.Search); other reads leave them out.
	Get(ctx context.Context, id string) (*workflow.Instance, error)

	// GetWithAttemptsInFlight returns the instance as Get does, with each
	// RUNNING step's attempts counting the attempt its leased task runs
	// (ShowAttemptsInFlight), read in one statement: what a reader is
	// shown. Nothing may be decided and written on it, or the count in
	// flight is stored by some versions and not by others.
	GetWithAttemptsInFlight(ctx context.Context, id string) (*workflow.Instance, error)

	// List returns instances newest first (created_at, then id, descending),
	// at most p.Limit of them, and a cursor for the next page ("" on the last).
	// A malformed cursor returns ErrInvalidCursor.
	List(ctx context.Context, p ListParams) (ListPage, error)

	// History returns the versions of the instance from version since on,
	// oldest first, with no gap: at most limit of them, or all of them when
	// limit is 0 (since 0, limit 0: versions 0, 1, …, current). A since
	// beyond the current version gives an empty, non-nil slice.
	// Errors: ErrNotFound for an unknown id; ErrInvalidArgument for a
	// negative since or limit.
	History(ctx context.Context, id string, since int64, limit int) ([]HistoryEntry, error)

	// DeleteInstance deletes the instance and its descendants (child
	// workflows, theirs, …), with their history, tasks and idempotency
	// keys, in one atomic write, only while the status of each is one of
	// workflow.StopStatuses (nothing runs for it any more) and, when
	// expectedVersion is not nil, the instance's version is
	// *expectedVersion; all are checked in the write itself, so a
	// concurrent retry that makes one RUNNING again makes the delete fail,
	// never delete a live instance.
	// Errors, in this order: ErrNotFound; ErrNotTerminal (wrapped, naming
	// the status); a *ConflictError carrying the actual version;
	// ErrNotTerminal (wrapped by LiveDescendant, naming a descendant that
	// has not finished).
	DeleteInstance(ctx context.Context, id string, expectedVersion *int64) error

	// Task reads, due work, claims and the group write.
	TaskQuerier

	// The one guarded write of a decided change.
	Applier

	// What a batch changes, read for the engine to decide and write.
	BatchReader
}

// Store is the state store: workflow instances, their history and their
// tasks, the atomic operations on them and the engine's guarded writes —
// what the engine and the API need of a database to run workflows. What a
// database keeps beside it for flowd (definitions, the worker registry,
// idempotency keys' expiry, counts, its schema and connections) is the rest
// of Backend.
type Store interface {
	Querier
	RetentionStore

	// Capabilities tells the conformance suite and the engine what the backend
	// can do, so they never branch on a type name.
	Capabilities() Capabilities
}

// Backend is one database behind flowd (store/postgres, store/sqlite): the
// state store and what is kept beside it. Both backends pass the
// conformance suite in store/storetest.
type Backend interface {
	Store
	DefinitionStore
	WorkerStore
	EventStore
	ScheduleStore
	BulkStore
	Counter
	Migrator

	// Ping reports whether the database answers.
	Ping(ctx context.Context) error

	// Close releases the store's connections.
	Close() error
}

// StorageReporter is implemented by a Store wrapper that watches every write
// (store/observed): StorageFull reports whether a
// write failed with ErrStorageFull and none has stored anything since.
type StorageReporter interface {
	StorageFull() bool
}

// Capabilities describes backend differences that callers may rely on.
type Capabilities struct {
	// Name is "postgres" or "sqlite"; for messages only.
	Name string
	// ConcurrentWriters is false when writes are serialised by the backend
	// (SQLite's single writer), true when row locks allow parallel writers.
	ConcurrentWriters bool
}

// CreateParams are the inputs of Querier.Create.
type CreateParams struct {
	ID         string          // optional; validated with workflow.ValidateInstanceID
	Definition string          // "" for a free-form instance
	Status     workflow.Status // default PENDING
	Input      json.RawMessage // immutable afterwards; nil means {}
	State      workflow.State
	Cause      string // history cause; default "create"
	// DefinitionRevision and Deadline are set by the engine for instances of a
	// definition. With a Definition and a DefinitionRevision above 0, that
	// revision must be stored: otherwise nothing is written and an error
	// wrapping ErrNotFound is returned (ErrStaleRevision under
	// LatestRevision), so no live instance outlives a deleted definition.
	DefinitionRevision int
	Deadline           *time.Time
	// Tasks are inserted with the instance, in the same atomic write, as
	// Apply inserts them (filled in on success); a task
	// without an InstanceID gets ID, one with another gets
	// ErrInvalidArgument. Notify wakes the workers of every node once the
	// instance is stored. Both are for the engine, which starts a workflow
	// with its first tasks in one statement.
	Tasks  []*Task
	Notify bool
	// IdempotencyKey, when not "", is recorded with the instance in the
	// same atomic write, with RequestHash (an opaque digest of the request,
	// compared to tell a repeat from a reuse of the key for another
	// request); see Querier.Create.
	IdempotencyKey string
	RequestHash    string
	// LatestRevision creates the instance only while DefinitionRevision is
	// the latest revision of Definition: when a newer one is stored, or that
	// revision is not stored any more (the definition was deleted), nothing
	// is written and an error that errors.Is ErrStaleRevision and
	// ErrConflict is returned.
	// The engine starts "the latest revision" this way without reading it
	// on every start.
	LatestRevision bool
	// Parent, when set, makes the instance a child workflow of that step
	// (stored with it; List finds it by ListParams.Parent).
	Parent *workflow.ParentRef
	// Concurrency, when set, is the instance's concurrency key and limit,
	// stored with it: every write that makes it hold a slot is checked
	// against the limit (see ConcurrencySlot).
	Concurrency *ConcurrencySlot
	// TraceParent, when not "", is stored with the instance: the W3C
	// traceparent of the trace its steps' attempts join.
	TraceParent string
	// Priority is stored with the instance (0: none, a free-form
	// instance); the engine copies it onto the instance's tasks.
	Priority int
	// Actor, when set, is the actor of history row 0 in place of the
	// context's (see WriteActor).
	Actor string
	// RerunOf, when set, is the instance this one re-runs (stored with it;
	// List finds the re-runs of an instance by ListParams.RerunOf). It is
	// a plain id, not a reference: the original may be deleted and the
	// re-run keeps naming it.
	RerunOf string
	// Descendant, when set, counts the new instance as one more
	// descendant of the top-level workflow Descendant.Root, in the same
	// atomic write: when that workflow already has Descendant.Max
	// descendants, nothing is written and a *DescendantLimitError
	// (errors.Is ErrDescendantLimit) is returned; when it is not stored
	// (deleted), an error wrapping ErrNotFound. The count never goes down
	// (a descendant that finished, or was deleted, still counts), and it
	// is exact however many writers create descendants of one workflow at
	// once: they take turns on the count. With an IdempotencyKey it is
	// ErrInvalidArgument.
	Descendant *DescendantCount
	// Search are the instance's search attributes (its definition's,
	// rendered, with the start's), stored with it in the same atomic
	// write; checked with workflow/instance.CheckSearch. None adds no row.
	Search map[string]json.RawMessage
}

// StaleRevision is the conflict Create returns under LatestRevision:
// errors.Is ErrStaleRevision and ErrConflict.
func StaleRevision(p CreateParams) error {
	return fmt.Errorf("%w: %w", ErrStaleRevision, &ConflictError{ID: p.ID, Actual: -1,
		Reason: fmt.Sprintf("definition %q has a revision newer than %d, or no longer has that one", p.Definition, p.DefinitionRevision)})
}

// ListParams filter and page Querier.List.
type ListParams struct {
	Status     workflow.Status // "" for any
	Definition string          // "" for any
	// IDPrefix keeps the instances whose id starts with it ("" for any);
	// checked with workflow.ValidateIDPrefix. Its characters are literal.
	IDPrefix string
	// Parent keeps the child workflows of that instance ("" for any);
	// checked with workflow.ValidateInstanceID.
	Parent string
	// Search keeps the instances whose search attribute NAME has the
	// value, compared as text (a string as it is; a number or a boolean
	// as JSON writes it); several are ANDed.
	Search map[string]string
	// CreatedAfter, CreatedBefore and UpdatedBefore keep the instances
	// created after, created before and last written before them (zero
	// for any).
	CreatedAfter  time.Time
	CreatedBefore time.Time
	UpdatedBefore time.Time
	// RerunOf keeps the re-runs of that instance ("" for any).
	RerunOf string
	Limit   int    // 1–1000; 0 means 50
	Cursor  string // opaque, from a previous ListPage
}

// ListPage is one page of Querier.List.
type ListPage struct {
	Instances  []*workflow.Instance
	NextCursor string // "" on the last page
}

// TransitionParams are the inputs of a status transition (the engine's
// Transition).
type TransitionParams struct {
	ID   string
	From workflow.Status
	To   workflow.Status
	// ExpectedVersion, when not nil, also requires the instance to be at that
	// version.
	ExpectedVersion *int64
	Cause           string // default "status FROM→TO"
}

// BatchStatusParams are the inputs of a batch status change (the engine's
// BatchStatus): it moves at most Limit instances whose status is Status
// and whose updated_at is before UpdatedBefore (and, with IDs, that are
// among them) to NewStatus, oldest updated_at first.
type BatchStatusParams struct {
	Status        workflow.Status
	UpdatedBefore time.Time
	NewStatus     workflow.Status
	Limit         int // 1–10000
	Cause         string
	// IDs, when not empty, keeps only these instances (at most
	// MaxBatchLimit): a batch of instances the caller read, each written
	// only while it still has Status.
	IDs []string
}

// MaxBatchLimit bounds BatchStatusParams.Limit.
const MaxBatchLimit = 10000

// MaxClaimQueues bounds how many queues one claim may name.
const MaxClaimQueues = 1000

// HistoryEntry is one version of an instance, as it was written (see
// instance.HistoryEntry; Actor is who asked for it, see WriteActor).
type HistoryEntry = instance.HistoryEntry

// Migrator is implemented by every Store: it creates or upgrades the schema.
type Migrator interface {
	// Migrate applies the embedded migrations that are not applied yet and
	// returns what it did. It is idempotent and safe when several processes run
	// it at once against one database.
	Migrate(ctx context.Context) (MigrationReport, error)
}

// MigrationReport says what Migrate did.
type MigrationReport struct {
	Applied []AppliedMigration // in order; empty when the schema was current
	Version int64              // schema version after the run
}

// AppliedMigration is one migration that Migrate applied.
type AppliedMigration struct {
	Version  int64
	Name     string
	Duration time.Duration
}
