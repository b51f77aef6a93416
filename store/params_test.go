package store_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var urlSafe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []store.Cursor{
		{CreatedAt: time.Date(2026, 5, 17, 10, 20, 30, 123456789, time.FixedZone("X", 3600)), ID: "a"},
		{CreatedAt: time.Unix(0, 0), ID: "0193f0c2-7d3e-7000-8000-000000000000"},
		{CreatedAt: time.Date(1900, 1, 1, 0, 0, 0, 1000, time.UTC), ID: "old:id.x_y-z"},
		{CreatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), ID: strings.Repeat("z", workflow.MaxIDLength)},
	} {
		s := store.EncodeCursor(c)
		if !urlSafe.MatchString(s) {
			t.Errorf("EncodeCursor(%+v) = %q, not URL-safe", c, s)
		}
		got, err := store.DecodeCursor(s)
		if err != nil {
			t.Errorf("DecodeCursor(EncodeCursor(%+v)): %v", c, err)
			continue
		}
		want := store.Cursor{CreatedAt: store.Timestamp(c.CreatedAt), ID: c.ID}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("cursor round trip (-want +got):\n%s", diff)
		}
		if got.CreatedAt.Location() != time.UTC {
			t.Errorf("decoded time %v is not UTC", got.CreatedAt)
		}
	}
}

func TestDecodeCursorGarbage(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	ts := func() []byte { return binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixMicro())) }
	for _, s := range []string{
		"", "!", "garbage!", "%%%", "a", "AAAA", "AAAAAAAAAAA", // too short
		enc(ts()),                                                // a time and no id
		enc(append(ts(), "a b"...)),                              // an invalid id
		enc(append(ts(), "x\x00"...)),                            // NUL
		enc(append(ts(), strings.Repeat("z", 129)...)),           // too long
		base64.StdEncoding.EncodeToString(append(ts(), "xy"...)), // padded
		enc(append(ts(), "x"...)) + "=",
		enc(append(ts(), "x"...)) + " ",
		"' OR '1'='1",
	} {
		c, err := store.DecodeCursor(s)
		if !errors.Is(err, store.ErrInvalidCursor) || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("DecodeCursor(%q) = %+v, %v; want ErrInvalidCursor (an ErrInvalidArgument)", s, c, err)
		}
		if c != (store.Cursor{}) {
			t.Errorf("DecodeCursor(%q) returned %+v with an error", s, c)
		}
	}
}

func TestTimestamp(t *testing.T) {
	in := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.FixedZone("UTC+5", 5*3600))
	got := store.Timestamp(in)
	if got.Location() != time.UTC || got.Nanosecond() != 678901000 || !got.Equal(in.Truncate(time.Microsecond)) {
		t.Errorf("Timestamp(%v) = %v, want %v in UTC truncated to µs", in, got, in.UTC().Truncate(time.Microsecond))
	}
	if got.Hour() != 22 || got.Day() != 1 {
		t.Errorf("Timestamp(%v) = %v: wrong UTC conversion", in, got)
	}
	if s := store.Timestamp(got); !s.Equal(got) || s.Location() != time.UTC {
		t.Errorf("Timestamp is not idempotent: %v → %v", got, s)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := store.NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("NewID() = %q (%v): want a UUIDv7", id, err)
		}
		if err := workflow.ValidateInstanceID(id); err != nil {
			t.Fatalf("NewID() = %q is not a valid instance id: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
		if id <= prev {
			t.Errorf("NewID() = %q after %q: not increasing", id, prev)
		}
		prev = id
	}
}

func TestCreateParamsNormalize(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		p := store.CreateParams{}
		if err := p.Normalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := uuid.Parse(p.ID); err != nil {
			t.Errorf("generated id %q: %v", p.ID, err)
		}
		if p.Status != workflow.StatusPending || string(p.Input) != "{}" || p.Cause != "create" {
			t.Errorf("defaults = status %q, input %q, cause %q; want PENDING, {}, create", p.Status, p.Input, p.Cause)
		}
	})
	t.Run("kept", func(t *testing.T) {
		p := store.CreateParams{ID: "a.b:c_d-9", Definition: "d", Status: workflow.StatusRunning, Input: json.RawMessage(" \n{\"a\": 1}\t"), Cause: "import"}
		if err := p.Normalize(); err != nil {
			t.Fatal(err)
		}
		want := store.CreateParams{ID: "a.b:c_d-9", Definition: "d", Status: workflow.StatusRunning, Input: json.RawMessage(`{"a": 1}`), Cause: "import"}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("Normalize (-want +got):\n%s", diff)
		}
	})
	t.Run("whitespaceInput", func(t *testing.T) {
		p := store.CreateParams{Input: json.RawMessage(" \n ")}
		if err := p.Normalize(); err != nil || string(p.Input) != "{}" {
			t.Errorf("Normalize with a blank input = %q, %v; want {}", p.Input, err)
		}
	})
	for _, c := range []struct {
		name string
		p    store.CreateParams
		want error
	}{
		{"spaceInID", store.CreateParams{ID: "a b"}, workflow.ErrInvalidID},
		{"longID", store.CreateParams{ID: strings.Repeat("a", 129)}, workflow.ErrInvalidID},
		{"unicodeID", store.CreateParams{ID: "é"}, workflow.ErrInvalidID},
		{"slashID", store.CreateParams{ID: "a/b"}, workflow.ErrInvalidID},
		{"completed", store.CreateParams{Status: workflow.StatusCompleted}, store.ErrInvalidArgument},
		{"cancelled", store.CreateParams{Status: workflow.StatusCancelled}, store.ErrInvalidArgument},
		{"unknownStatus", store.CreateParams{Status: "NOPE"}, store.ErrInvalidArgument},
		{"badInput", store.CreateParams{Input: json.RawMessage(`{`)}, store.ErrInvalidArgument},
		{"twoInputs", store.CreateParams{Input: json.RawMessage(`{} {}`)}, store.ErrInvalidArgument},
		{"badStepID", store.CreateParams{State: workflow.State{Steps: map[string]*workflow.StepState{"a,b": {Status: workflow.StepPending}}}}, workflow.ErrInvalidState},
		{"badStepStatus", store.CreateParams{State: workflow.State{Steps: map[string]*workflow.StepState{"a": {Status: "DONE"}}}}, workflow.ErrInvalidState},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			if err := p.Normalize(); !errors.Is(err, c.want) {
				t.Errorf("Normalize(%+v) = %v, want %v", c.p, err, c.want)
			}
		})
	}
}

func TestListParamsNormalize(t *testing.T) {
	for _, c := range []struct {
		p         store.ListParams
		wantLimit int
		want      error
	}{
		{store.ListParams{}, store.DefaultListLimit, nil},
		{store.ListParams{Limit: 1}, 1, nil},
		{store.ListParams{Limit: store.MaxListLimit}, store.MaxListLimit, nil},
		{store.ListParams{Status: workflow.StatusFailed, Definition: "x", Cursor: "anything"}, store.DefaultListLimit, nil},
		{store.ListParams{Limit: store.MaxListLimit + 1}, 0, store.ErrInvalidArgument},
		{store.ListParams{Limit: -1}, 0, store.ErrInvalidArgument},
		{store.ListParams{Status: "NOPE"}, 0, store.ErrInvalidArgument},
	} {
		p := c.p
		err := p.Normalize()
		if c.want == nil {
			if err != nil || p.Limit != c.wantLimit {
				t.Errorf("Normalize(%+v) = limit %d, %v; want %d, nil", c.p, p.Limit, err, c.wantLimit)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("Normalize(%+v) = %v, want %v", c.p, err, c.want)
		}
	}
}

func TestTransitionParamsNormalize(t *testing.T) {
	for _, from := range workflow.Statuses {
		for _, to := range workflow.Statuses {
			p := store.TransitionParams{ID: "w", From: from, To: to}
			err := p.Normalize()
			if workflow.CanTransition(from, to) {
				if err != nil || p.Cause != "status "+string(from)+"→"+string(to) {
					t.Errorf("Normalize(%s → %s) = cause %q, %v", from, to, p.Cause, err)
				}
				continue
			}
			if !errors.Is(err, workflow.ErrInvalidTransition) || errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("Normalize(%s → %s) = %v, want ErrInvalidTransition only", from, to, err)
			}
		}
	}
	p := store.TransitionParams{From: workflow.StatusPending, To: workflow.StatusRunning, Cause: "start"}
	if err := p.Normalize(); err != nil || p.Cause != "start" {
		t.Errorf("Normalize kept cause %q, %v; want start", p.Cause, err)
	}
	for _, p := range []store.TransitionParams{{From: "NOPE", To: workflow.StatusRunning}, {From: workflow.StatusPending, To: ""}} {
		if err := p.Normalize(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Normalize(%q → %q) = %v, want ErrInvalidArgument", p.From, p.To, err)
		}
	}
}

func TestBatchStatusParamsNormalize(t *testing.T) {
	ok := store.BatchStatusParams{Status: workflow.StatusRunning, NewStatus: workflow.StatusTimedOut, UpdatedBefore: time.Now(), Limit: 1}
	p := ok
	if err := p.Normalize(); err != nil || p.Cause != "batch RUNNING→TIMED_OUT" {
		t.Errorf("Normalize = cause %q, %v", p.Cause, err)
	}
	p = ok
	p.Limit, p.Cause = store.MaxBatchLimit, "sweep"
	if err := p.Normalize(); err != nil || p.Cause != "sweep" {
		t.Errorf("Normalize with limit %d = cause %q, %v", store.MaxBatchLimit, p.Cause, err)
	}
	for _, c := range []struct {
		change func(*store.BatchStatusParams)
		want   error
	}{
		{func(p *store.BatchStatusParams) { p.Limit = 0 }, store.ErrInvalidArgument},
		{func(p *store.BatchStatusParams) { p.Limit = -1 }, store.ErrInvalidArgument},
		{func(p *store.BatchStatusParams) { p.Limit = store.MaxBatchLimit + 1 }, store.ErrInvalidArgument},
		{func(p *store.BatchStatusParams) { p.Status = "NOPE" }, store.ErrInvalidArgument},
		{func(p *store.BatchStatusParams) { p.NewStatus = "" }, store.ErrInvalidArgument},
		{func(p *store.BatchStatusParams) {
			p.Status = workflow.StatusPending
			p.NewStatus = workflow.StatusPaused
		}, workflow.ErrInvalidTransition},
		{func(p *store.BatchStatusParams) {
			p.Status = workflow.StatusCompleted
			p.NewStatus = workflow.StatusRunning
		}, workflow.ErrInvalidTransition},
		{func(p *store.BatchStatusParams) { p.NewStatus = workflow.StatusRunning }, workflow.ErrInvalidTransition},
		// A bad limit is reported before a bad transition.
		{func(p *store.BatchStatusParams) { p.Limit = 0; p.NewStatus = workflow.StatusRunning }, store.ErrInvalidArgument},
	} {
		p := ok
		c.change(&p)
		if err := p.Normalize(); !errors.Is(err, c.want) {
			t.Errorf("Normalize(%+v) = %v, want %v", p, err, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	var err error = &store.ConflictError{ID: "w", Expected: 1, Actual: 2}
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("ConflictError: errors.Is wrong for %v", err)
	}
	if got := err.Error(); got != "concurrent modification of workflow w: expected version 1, current version is 2" {
		t.Errorf("ConflictError.Error() = %q", got)
	}
	for _, c := range []struct {
		err  *store.ConflictError
		want string
	}{
		{&store.ConflictError{Reason: "deadlock detected", Actual: -1}, "concurrent modification: deadlock detected"},
		{&store.ConflictError{ID: "w", Reason: "serialization failure", Actual: -1}, "concurrent modification of workflow w: serialization failure"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
	wrapped := errors.Join(errBoom, err)
	var ce *store.ConflictError
	if !errors.As(wrapped, &ce) || ce.Actual != 2 {
		t.Errorf("errors.As through a wrap = %v", ce)
	}

	err = &store.StatusMismatchError{ID: "w", Expected: workflow.StatusRunning, Actual: workflow.StatusPaused}
	if !errors.Is(err, store.ErrStatusMismatch) || errors.Is(err, store.ErrConflict) {
		t.Errorf("StatusMismatchError: errors.Is wrong for %v", err)
	}
	if got := err.Error(); got != "workflow w is PAUSED, not RUNNING" {
		t.Errorf("StatusMismatchError.Error() = %q", got)
	}

	err = store.NotFound("w-1")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"w-1"`) {
		t.Errorf("NotFound(w-1) = %v", err)
	}
	if !errors.Is(store.ErrInvalidCursor, store.ErrInvalidArgument) {
		t.Error("ErrInvalidCursor is not an ErrInvalidArgument")
	}
}
