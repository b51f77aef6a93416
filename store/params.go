package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/workflow"
	"github.com/flowd/flowd/workflow/instance"
)

// DefaultListLimit and MaxListLimit bound ListParams.Limit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// Timestamp normalises t the way every backend stores it: UTC, microseconds.
// Stores use it so that PostgreSQL and SQLite return identical times.
func Timestamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// NewID returns a fresh server-generated instance id (UUIDv7: time-ordered).
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Normalize validates p and fills its defaults. Backends call it first, so
// every backend rejects exactly the same input.
func (p *CreateParams) Normalize() error {
	if p.ID == "" {
		p.ID = NewID()
	} else if err := workflow.ValidateInstanceID(p.ID); err != nil {
		return err
	}
	if p.Status == "" {
		p.Status = workflow.StatusPending
	}
	if !p.Status.Valid() {
		return fmt.Errorf("%w: unknown status %q", ErrInvalidArgument, p.Status)
	}
	if p.Status.Terminal() {
		return fmt.Errorf("%w: an instance cannot be created %s", ErrInvalidArgument, p.Status)
	}
	in := bytes.TrimSpace(p.Input)
	if len(in) == 0 || string(in) == "null" {
		in = []byte("{}")
	}
	if !json.Valid(in) {
		return fmt.Errorf("%w: input is not valid JSON", ErrInvalidArgument)
	}
	p.Input = json.RawMessage(in)
	if err := p.State.Validate(); err != nil {
		return err
	}
	if p.Cause == "" {
		p.Cause = "create"
	}
	if err := p.Concurrency.Check(); err != nil {
		return err
	}
	if p.Concurrency != nil && p.Definition == "" {
		return fmt.Errorf("%w: a concurrency key belongs to a definition: a free-form instance has none", ErrInvalidArgument)
	}
	if err := p.Parent.Validate(); err != nil {
		return err
	}
	if p.RerunOf != "" {
		if err := workflow.ValidateInstanceID(p.RerunOf); err != nil {
			return fmt.Errorf("rerun_of: %w", err)
		}
	}
	if err := p.Descendant.Check(); err != nil {
		return err
	}
	if _, err := instance.CheckSearch(p.Search); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if p.Descendant != nil && p.IdempotencyKey != "" {
		return fmt.Errorf("%w: a create counted as a descendant takes no idempotency key", ErrInvalidArgument)
	}
	if p.LatestRevision && (p.Definition == "" || p.DefinitionRevision < 1) {
		return fmt.Errorf("%w: LatestRevision needs a definition and its revision", ErrInvalidArgument)
	}
	if p.IdempotencyKey != "" {
		if err := ValidateIdempotencyKey(p.IdempotencyKey); err != nil {
			return err
		}
		if err := ValidateIdempotencyKey(p.RequestHash); err != nil {
			return fmt.Errorf("request hash: %w", err)
		}
	} else if p.RequestHash != "" {
		return fmt.Errorf("%w: a request hash without an idempotency key", ErrInvalidArgument)
	}
	for _, t := range p.Tasks {
		switch {
		case t == nil:
			return fmt.Errorf("%w: nil task", ErrInvalidArgument)
		case t.InstanceID == "":
			t.InstanceID = p.ID
		case t.InstanceID != p.ID:
			return fmt.Errorf("%w: task %q of workflow %q created with workflow %q", ErrInvalidArgument, t.ID, t.InstanceID, p.ID)
		}
	}
	return nil
}

// CheckHistoryRange validates the since and limit of Querier.History.
func CheckHistoryRange(since int64, limit int) error {
	if since < 0 || limit < 0 {
		return fmt.Errorf("%w: history since %d and limit %d must not be negative", ErrInvalidArgument, since, limit)
	}
	return nil
}

// Normalize validates p and fills its defaults.
func (p *ListParams) Normalize() error {
	if p.Limit == 0 {
		p.Limit = DefaultListLimit
	}
	if p.Limit < 1 || p.Limit > MaxListLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxListLimit)
	}
	if p.Status != "" && !p.Status.Valid() {
		return fmt.Errorf("%w: unknown status %q", ErrInvalidArgument, p.Status)
	}
	if p.IDPrefix != "" {
		if err := workflow.ValidateIDPrefix(p.IDPrefix); err != nil {
			return err
		}
	}
	if p.Parent != "" {
		if err := workflow.ValidateInstanceID(p.Parent); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	}
	if p.RerunOf != "" {
		if err := workflow.ValidateInstanceID(p.RerunOf); err != nil {
			return fmt.Errorf("rerun_of: %w", err)
		}
	}
	return p.normalizeSearchAndTimes()
}

// Normalize checks the transition against the table before any I/O.
func (p *TransitionParams) Normalize() error {
	if !p.From.Valid() || !p.To.Valid() {
		return fmt.Errorf("%w: unknown status in %q → %q", ErrInvalidArgument, p.From, p.To)
	}
	if !workflow.CanTransition(p.From, p.To) {
		return fmt.Errorf("%w: %s → %s", workflow.ErrInvalidTransition, p.From, p.To)
	}
	if p.Cause == "" {
		p.Cause = fmt.Sprintf("status %s→%s", p.From, p.To)
	}
	return nil
}

// Normalize checks limit, statuses and the transition before any I/O.
func (p *BatchStatusParams) Normalize() error {
	if p.Limit < 1 || p.Limit > MaxBatchLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxBatchLimit)
	}
	if !p.Status.Valid() || !p.NewStatus.Valid() {
		return fmt.Errorf("%w: unknown status in %q → %q", ErrInvalidArgument, p.Status, p.NewStatus)
	}
	if !workflow.CanTransition(p.Status, p.NewStatus) {
		return fmt.Errorf("%w: %s → %s", workflow.ErrInvalidTransition, p.Status, p.NewStatus)
	}
	if len(p.IDs) > MaxBatchLimit {
		return fmt.Errorf("%w: %d ids, at most %d", ErrInvalidArgument, len(p.IDs), MaxBatchLimit)
	}
	// Stored times have microsecond precision: round the cut-off up, so that
	// "updated_at < UpdatedBefore" keeps its exact meaning at that precision.
	if ts := Timestamp(p.UpdatedBefore); ts.Before(p.UpdatedBefore) {
		p.UpdatedBefore = ts.Add(time.Microsecond)
	} else {
		p.UpdatedBefore = ts
	}
	if p.Cause == "" {
		p.Cause = fmt.Sprintf("batch %s→%s", p.Status, p.NewStatus)
	}
	return nil
}

// Cursor is the decoded position of a List page: the last row returned.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// EncodeCursor returns the opaque, URL-safe form of c.
func EncodeCursor(c Cursor) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.CreatedAt.UnixMicro()))
	b = append(b, c.ID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses a cursor made by EncodeCursor; ErrInvalidCursor otherwise.
func DecodeCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 9 {
		return Cursor{}, ErrInvalidCursor
	}
	id := string(b[8:])
	if workflow.ValidateInstanceID(id) != nil {
		return Cursor{}, ErrInvalidCursor
	}
	us := int64(binary.BigEndian.Uint64(b[:8]))
	return Cursor{CreatedAt: time.UnixMicro(us).UTC(), ID: id}, nil
}
