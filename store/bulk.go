package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/workflow"
	"github.com/flowd/flowd/workflow/instance"
)

// BulkStore keeps bulk operations: an action applied to every instance a
// filter matches, worked off in batches by the sweepers of every node. The
// record is where the work stands (cursor, the batch in flight, counts,
// the lease of the node working it); every change of it is a
// compare-and-set of its version, so two nodes never both advance it.
type BulkStore interface {
	// PutBulk stores op. With expectedVersion 0 it inserts op at version
	// 1 (ErrExists when op.ID is taken); otherwise it replaces the record
	// only while its version is expectedVersion, and the stored one gets
	// expectedVersion+1. It returns the record as stored (version,
	// updated_at; created_at kept from the insert).
	// Errors: ErrInvalidArgument (see BulkOperation.Validate); ErrNotFound;
	// a *ConflictError carrying the version stored when the guard missed,
	// with nothing written.
	PutBulk(ctx context.Context, op *BulkOperation, expectedVersion int64) (*BulkOperation, error)
	// ListBulk returns bulk operations, newest first (created_at, then id,
	// descending): with p.ID only that one ([] when it is not stored; see
	// GetBulk), with p.Status only those in that status, at most p.Limit
	// of them (0: DefaultBulkListLimit).
	ListBulk(ctx context.Context, p ListBulkParams) ([]*BulkOperation, error)
}

// The statuses of a bulk operation.
const (
	BulkRunning   = "RUNNING"
	BulkDone      = "DONE"
	BulkCancelled = "CANCELLED"
)

// BulkActions are the actions a bulk operation may apply: the lifecycle
// actions, and delete (of finished instances).
var BulkActions = []string{"cancel", "pause", "resume", "retry", "delete"}

// MaxBulkErrors is how many failures a bulk operation keeps the message of.
const MaxBulkErrors = 20

// DefaultBulkListLimit and MaxBulkListLimit bound ListBulkParams.Limit.
const (
	DefaultBulkListLimit = 50
	MaxBulkListLimit     = 1000
)

// ListBulkParams filter BulkStore.ListBulk.
type ListBulkParams struct {
	ID     string // "" for any
	Status string // "" for any
	Limit  int
}

// GetBulk is ListBulk of one id: the operation, or an error wrapping
// ErrNotFound.
func GetBulk(ctx context.Context, s BulkStore, id string) (*BulkOperation, error) {
	list, err := s.ListBulk(ctx, ListBulkParams{ID: id})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, BulkNotFound(id)
	}
	return list[0], nil
}

// BulkFilter is what a bulk operation's instances match: every field that
// is set (ANDed), as ListParams filters a list.
type BulkFilter struct {
	Status     workflow.Status   `json:"status,omitempty"`
	Definition string            `json:"definition,omitempty"`
	Parent     string            `json:"parent,omitempty"`
	IDPrefix   string            `json:"id_prefix,omitempty"`
	Search     map[string]string `json:"search,omitempty"`
	// Times are compared as ListParams compares them.
	CreatedAfter  *time.Time `json:"created_after,omitempty"`
	CreatedBefore *time.Time `json:"created_before,omitempty"`
	UpdatedBefore *time.Time `json:"updated_before,omitempty"`
}

// Empty reports whether f sets nothing: it would match every instance.
func (f *BulkFilter) Empty() bool {
	return f.Status == "" && f.Definition == "" && f.Parent == "" && f.IDPrefix == "" && len(f.Search) == 0 &&
		f.CreatedAfter == nil && f.CreatedBefore == nil && f.UpdatedBefore == nil
}

// Problems lists what is wrong with f, each problem one message.
func (f *BulkFilter) Problems() []string {
	var out []string
	if f.Empty() {
		out = append(out, "the filter is empty: it would match every workflow; name at least one of status, definition, parent, id_prefix, search, created_after, created_before, updated_before")
	}
	if f.Status != "" && !f.Status.Valid() {
		out = append(out, fmt.Sprintf("filter.status: unknown status %q", f.Status))
	}
	if f.Definition != "" {
		if err := workflow.ValidateDefinitionName(f.Definition); err != nil {
			out = append(out, "filter.definition: "+err.Error())
		}
	}
	if f.Parent != "" {
		if err := workflow.ValidateInstanceID(f.Parent); err != nil {
			out = append(out, "filter.parent: "+err.Error())
		}
	}
	if f.IDPrefix != "" {
		if err := workflow.ValidateIDPrefix(f.IDPrefix); err != nil {
			out = append(out, "filter.id_prefix: "+err.Error())
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Search)) {
		if !validSearchName(name) {
			out = append(out, fmt.Sprintf("filter.search: name %q: a search attribute name is 1–63 characters of [a-z0-9_], starting with a letter", name))
		}
	}
	if f.CreatedAfter != nil && f.CreatedBefore != nil && !f.CreatedAfter.Before(*f.CreatedBefore) {
		out = append(out, "filter.created_after must be before filter.created_before")
	}
	return out
}

// validSearchName: [a-z][a-z0-9_]{0,62}.
func validSearchName(name string) bool {
	if len(name) == 0 || len(name) > 63 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// ListParams is f as a List filter, bounded to the instances created
// before before (when it is earlier than f's own bound): a bulk operation
// never touches an instance created after it.
func (f *BulkFilter) ListParams(before time.Time) ListParams {
	p := ListParams{Status: f.Status, Definition: f.Definition, Parent: f.Parent, IDPrefix: f.IDPrefix, Search: f.Search}
	if f.CreatedAfter != nil {
		p.CreatedAfter = *f.CreatedAfter
	}
	p.CreatedBefore = before
	if f.CreatedBefore != nil && (before.IsZero() || f.CreatedBefore.Before(before)) {
		p.CreatedBefore = *f.CreatedBefore
	}
	if f.UpdatedBefore != nil {
		p.UpdatedBefore = *f.UpdatedBefore
	}
	return p
}

// Matches reports whether inst, as read, is one that p keeps: the check
// in Go of what List's query checked, made again on an instance read
// after it was listed (it may have changed since). Search attributes are
// compared as List compares them, as text (instance.SearchText); the time
// bounds are exclusive.
func (p *ListParams) Matches(inst *workflow.Instance) bool {
	if p.Status != "" && inst.Status != p.Status {
		return false
	}
	if p.Definition != "" && inst.Definition != p.Definition {
		return false
	}
	if p.Parent != "" && (inst.Parent == nil || inst.Parent.WorkflowID != p.Parent) {
		return false
	}
	if p.IDPrefix != "" && !strings.HasPrefix(inst.ID, p.IDPrefix) {
		return false
	}
	if p.RerunOf != "" && inst.RerunOf != p.RerunOf {
		return false
	}
	for name, want := range p.Search {
		raw, ok := inst.Search[name]
		if !ok {
			return false
		}
		if got, _, err := instance.SearchText(name, raw); err != nil || got != want {
			return false
		}
	}
	if !p.CreatedAfter.IsZero() && !inst.CreatedAt.After(p.CreatedAfter) {
		return false
	}
	if !p.CreatedBefore.IsZero() && !inst.CreatedAt.Before(p.CreatedBefore) {
		return false
	}
	if !p.UpdatedBefore.IsZero() && !inst.UpdatedAt.Before(p.UpdatedBefore) {
		return false
	}
	return true
}

// BulkRetention is how long a bulk operation that ended (DONE or
// CANCELLED) is kept, for GET /v1/bulk/{id} and the list of recent ones;
// the sweeper deletes it afterwards (PruneBulk).
const BulkRetention = 7 * 24 * time.Hour

// BulkError is one instance a bulk operation failed on, with the error.
type BulkError struct {
	WorkflowID string `json:"workflow_id"`
	Error      string `json:"error"`
}

// BulkItem is an instance of the batch in flight, with the version it was
// listed at: a node that takes over the batch tells from the history after
// that version whether the action was already applied.
type BulkItem struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// BulkOperation is one stored bulk operation.
type BulkOperation struct {
	ID     string
	Action string // one of BulkActions
	Filter BulkFilter
	// Limit caps the instances the action is applied to (Done); 0: none.
	Limit  int
	Status string // BulkRunning, BulkDone, BulkCancelled
	// Actor is who asked for it: the actor of the instances' writes.
	Actor string

	// Matched = Done + Skipped + Failed: the instances dealt with.
	// Skipped ones no longer matched when read again, or the action did
	// not apply to them; Errors keeps the first MaxBulkErrors failures.
	Matched, Done, Skipped, Failed int
	Errors                         []BulkError

	// Cursor is the List cursor after the last batch finished ("" before
	// the first); Pending is the batch in flight (nil between batches)
	// and PendingCursor the cursor after it; Exhausted: the batch in
	// flight is the last.
	Cursor        string
	Pending       []BulkItem
	PendingCursor string
	Exhausted     bool
	// LeaseOwner works it until LeaseUntil; another node may take it over
	// after.
	LeaseOwner string
	LeaseUntil time.Time

	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// Validate checks what a backend must never store.
func (op *BulkOperation) Validate() error {
	switch {
	case op.ID == "":
		return fmt.Errorf("%w: a bulk operation needs an id", ErrInvalidArgument)
	case !slices.Contains(BulkActions, op.Action):
		return fmt.Errorf("%w: unknown bulk action %q", ErrInvalidArgument, op.Action)
	case op.Status != BulkRunning && op.Status != BulkDone && op.Status != BulkCancelled:
		return fmt.Errorf("%w: unknown bulk status %q", ErrInvalidArgument, op.Status)
	case op.Limit < 0:
		return fmt.Errorf("%w: bulk limit %d is negative", ErrInvalidArgument, op.Limit)
	}
	return nil
}

// Finished reports whether op has ended (DONE or CANCELLED).
func (op *BulkOperation) Finished() bool { return op.Status != BulkRunning }

// BulkNotFound is the error of a bulk operation that is not stored.
func BulkNotFound(id string) error {
	return fmt.Errorf("bulk operation %q: %w", id, ErrNotFound)
}

// bulkDoc is what a backend stores of a bulk operation besides the
// columns it compares or orders by (id, status, version, created_at,
// updated_at): one JSON document, encoded and decoded here only.
type bulkDoc struct {
	Action        string      `json:"action"`
	Filter        BulkFilter  `json:"filter"`
	Limit         int         `json:"limit,omitempty"`
	Actor         string      `json:"actor,omitempty"`
	Matched       int         `json:"matched"`
	Done          int         `json:"done"`
	Skipped       int         `json:"skipped"`
	Failed        int         `json:"failed"`
	Errors        []BulkError `json:"errors,omitempty"`
	Cursor        string      `json:"cursor,omitempty"`
	Pending       []BulkItem  `json:"pending,omitempty"`
	PendingCursor string      `json:"pending_cursor,omitempty"`
	Exhausted     bool        `json:"exhausted,omitempty"`
	LeaseOwner    string      `json:"lease_owner,omitempty"`
	LeaseUntil    time.Time   `json:"lease_until"`
	FinishedAt    *time.Time  `json:"finished_at,omitempty"`
}

// EncodeBulk is the document a backend stores for op.
func EncodeBulk(op *BulkOperation) ([]byte, error) {
	return json.Marshal(bulkDoc{
		Action: op.Action, Filter: op.Filter, Limit: op.Limit, Actor: op.Actor,
		Matched: op.Matched, Done: op.Done, Skipped: op.Skipped, Failed: op.Failed, Errors: op.Errors,
		Cursor: op.Cursor, Pending: op.Pending, PendingCursor: op.PendingCursor, Exhausted: op.Exhausted,
		LeaseOwner: op.LeaseOwner, LeaseUntil: Timestamp(op.LeaseUntil), FinishedAt: op.FinishedAt,
	})
}

// DecodeBulk fills op from a document EncodeBulk made.
func DecodeBulk(doc []byte, op *BulkOperation) error {
	var d bulkDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return fmt.Errorf("bulk operation %q: stored document: %w", op.ID, err)
	}
	op.Action, op.Filter, op.Limit, op.Actor = d.Action, d.Filter, d.Limit, d.Actor
	op.Matched, op.Done, op.Skipped, op.Failed, op.Errors = d.Matched, d.Done, d.Skipped, d.Failed, d.Errors
	op.Cursor, op.Pending, op.PendingCursor, op.Exhausted = d.Cursor, d.Pending, d.PendingCursor, d.Exhausted
	op.LeaseOwner, op.LeaseUntil, op.FinishedAt = d.LeaseOwner, d.LeaseUntil.UTC(), d.FinishedAt
	if op.FinishedAt != nil {
		t := op.FinishedAt.UTC()
		op.FinishedAt = &t
	}
	return nil
}

// BulkConflict is the error of a compare-and-set of a bulk operation that
// missed: errors.As a *ConflictError carrying the stored version.
func BulkConflict(id string, expected, actual int64) error {
	return fmt.Errorf("bulk operation %q changed meanwhile: %w", id, &ConflictError{ID: id, Expected: expected, Actual: actual})
}

// Normalize fills the default limit and checks the parameters.
func (p *ListBulkParams) Normalize() error {
	if p.Limit == 0 {
		p.Limit = DefaultBulkListLimit
	}
	if p.Limit < 1 || p.Limit > MaxBulkListLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxBulkListLimit)
	}
	if p.Status != "" && p.Status != BulkRunning && p.Status != BulkDone && p.Status != BulkCancelled {
		return fmt.Errorf("%w: unknown bulk status %q", ErrInvalidArgument, p.Status)
	}
	return nil
}
