package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flowd/flowd/workflow"
)

// ScheduleStore keeps the schedules that start instances of a definition at
// the fire times of a cron expression, and the one guarded write that fires
// them (FireSchedule), which makes each fire time start at most one instance
// across every node.
type ScheduleStore interface {
	// PutSchedule creates the schedule s.Name or replaces its definition,
	// cron, timezone, input, overlap, paused flag and catch-up window. A
	// new schedule starts with FiredUntil = s.FiredUntil (the caller's
	// now: no fire time before it fires); a replaced one keeps its
	// FiredUntil, LastFireAt, LastInstanceID and BufferedFireAt, so a
	// replace never fires a time twice. created tells which it was.
	// Errors: ErrInvalidArgument (see Schedule.Normalize).
	PutSchedule(ctx context.Context, s Schedule) (out *Schedule, created bool, err error)
	// ListSchedules returns the schedules by name (bytewise): every one,
	// or with p.Name only that one ([] when it is not stored; see
	// GetSchedule).
	ListSchedules(ctx context.Context, p ListSchedulesParams) ([]*Schedule, error)
	// DeleteSchedule deletes the schedule (not the instances it started).
	// Errors: ErrNotFound.
	DeleteSchedule(ctx context.Context, name string) error
	// SetSchedulePaused sets the paused flag. Errors: ErrNotFound.
	SetSchedulePaused(ctx context.Context, name string, paused bool) (*Schedule, error)
	// FireSchedule is the one write of a fire: in one transaction, while
	// the schedule is not paused and its FiredUntil and BufferedFireAt are
	// still f.FiredUntil and f.BufferedFireAt (compare-and-set: what the
	// firing node read), it sets them to f.NewFiredUntil and
	// f.NewBufferedFireAt and, with f.Start, creates that instance and
	// records its id and f.FireAt as the last fire. When an instance with
	// f.Start.ID already exists (a fire whose create landed on another
	// path: a backfill, a trigger, a fire written before the schedule
	// could advance), the schedule advances all the same and nothing is
	// created: that fire time has started its instance. It returns the
	// instance created (nil when none was). Errors: ErrNotFound; a
	// *ConflictError (errors.Is ErrConflict) when the guard missed (another
	// node fired, or the schedule was paused or replaced meanwhile): nothing
	// was written; Create's errors for f.Start, with nothing written.
	FireSchedule(ctx context.Context, f ScheduleFire) (*workflow.Instance, error)
}

// ListSchedulesParams filter ScheduleStore.ListSchedules.
type ListSchedulesParams struct {
	Name string // "" for every schedule
}

// GetSchedule is ListSchedules of one name: the schedule, or an error
// wrapping ErrNotFound.
func GetSchedule(ctx context.Context, s ScheduleStore, name string) (*Schedule, error) {
	list, err := s.ListSchedules(ctx, ListSchedulesParams{Name: name})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, ScheduleNotFound(name)
	}
	return list[0], nil
}

// ScheduleNotFound is the error of a schedule that is not stored.
func ScheduleNotFound(name string) error {
	return fmt.Errorf("schedule %q: %w", name, ErrNotFound)
}

// Overlap policies: what a fire does while the previous instance of the
// schedule is not finished.
const (
	OverlapSkip        = "skip"
	OverlapAllow       = "allow"
	OverlapBufferOne   = "buffer_one"
	OverlapCancelOther = "cancel_other"
)

// OverlapPolicies lists the overlap values, the default first.
var OverlapPolicies = []string{OverlapSkip, OverlapAllow, OverlapBufferOne, OverlapCancelOther}

// DefaultCatchupWindow is the catch-up window of a schedule that names none.
const DefaultCatchupWindow = time.Minute

// MaxScheduleNameLength leaves room in a 128-character instance id for the
// "-20261125T040000Z" that the fire time adds to the name.
const MaxScheduleNameLength = workflow.MaxIDLength - len("-20261125T040000Z")

// Schedule is one stored schedule.
type Schedule struct {
	Name       string
	Definition string
	Cron       string
	Timezone   string          // IANA name; "" is UTC
	Input      json.RawMessage // the input of every instance it starts; nil means {}
	Overlap    string          // one of OverlapPolicies; "" is skip
	Paused     bool
	// CatchupWindow: a fire time found due more than this long after it
	// passed is not started but counted as missed. 0 is DefaultCatchupWindow.
	CatchupWindow time.Duration

	// FiredUntil: every fire time at or before it has been dealt with
	// (started, buffered or missed).
	FiredUntil time.Time
	// LastFireAt and LastInstanceID are the fire time and id of the last
	// instance a fire started (nil, "" before the first).
	LastFireAt     *time.Time
	LastInstanceID string
	// BufferedFireAt is the fire time waiting for the previous instance to
	// finish under overlap buffer_one (nil when none waits).
	BufferedFireAt *time.Time

	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleFire is the input of ScheduleStore.FireSchedule.
type ScheduleFire struct {
	Name string
	// The guard: the values the firing node read.
	FiredUntil     time.Time
	BufferedFireAt *time.Time
	// The new values.
	NewFiredUntil     time.Time
	NewBufferedFireAt *time.Time
	// Start, when not nil, is the instance of the fire at FireAt.
	Start  *CreateParams
	FireAt time.Time
}

// ScheduleError lists every problem of a schedule that cannot be stored,
// so that one answer names them all. errors.Is(err, ErrInvalidArgument)
// holds.
type ScheduleError struct {
	Problems []string
}

func (e *ScheduleError) Error() string {
	return "invalid schedule: " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *ScheduleError) Is(target error) bool { return target == ErrInvalidArgument }

// Problems lists what is wrong with s's name, definition, overlap and
// catch-up window, and a missing cron (the cron's and time zone's own
// syntax is package schedule's to check).
func (s *Schedule) Problems() []string {
	var problems []string
	if p := scheduleNameProblem(s.Name); p != "" {
		problems = append(problems, p)
	}
	if s.Definition == "" {
		problems = append(problems, "a schedule needs a definition")
	}
	if s.Cron == "" {
		problems = append(problems, "a schedule needs a cron expression")
	}
	if s.Overlap != "" && !validOverlap(s.Overlap) {
		problems = append(problems, fmt.Sprintf("overlap %q is not one of %v", s.Overlap, OverlapPolicies))
	}
	if s.CatchupWindow < 0 {
		problems = append(problems, fmt.Sprintf("catchup_window must not be negative, got %s", s.CatchupWindow))
	}
	return problems
}

// Normalize validates s (a *ScheduleError names every problem Problems
// finds) and puts it in the form every backend stores: the overlap and
// catch-up window defaults filled in, input compact JSON ({} when none),
// times as Timestamp.
func (s *Schedule) Normalize() error {
	if problems := s.Problems(); len(problems) > 0 {
		return &ScheduleError{Problems: problems}
	}
	if s.Overlap == "" {
		s.Overlap = OverlapSkip
	}
	if s.CatchupWindow == 0 {
		s.CatchupWindow = DefaultCatchupWindow
	}
	input, err := compactJSON(s.Input)
	if err != nil {
		return err
	}
	s.Input = input
	s.FiredUntil = Timestamp(s.FiredUntil)
	return nil
}

func validOverlap(o string) bool {
	for _, p := range OverlapPolicies {
		if o == p {
			return true
		}
	}
	return false
}

// ValidateScheduleName checks a schedule name: 1–111 characters of
// [A-Za-z0-9._-], so that the name followed by a fire time is a valid
// instance id.
func ValidateScheduleName(name string) error {
	if p := scheduleNameProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, p)
	}
	return nil
}

func scheduleNameProblem(name string) string {
	if len(name) > MaxScheduleNameLength {
		return fmt.Sprintf("schedule name is %d characters long, at most %d are allowed", len(name), MaxScheduleNameLength)
	}
	if err := workflow.ValidateStepID(name); err != nil {
		// Step ids have exactly the characters of a schedule name; the
		// message names the schedule, not a step.
		return fmt.Sprintf("schedule name %q: only 1–%d characters of [A-Za-z0-9._-] are allowed", name, MaxScheduleNameLength)
	}
	return ""
}

// ScheduleInstanceID is the id of the instance a schedule starts for the
// fire time at: the schedule's name, "-", and the time in UTC to the second
// (sched-20261125T040000Z). Two schedules firing at the same time get
// different ids; one fire time always gets the same one, which is what
// makes a fire start at most one instance.
func ScheduleInstanceID(name string, at time.Time) string {
	return name + "-" + at.UTC().Format("20060102T150405Z")
}

// compactJSON checks that raw is JSON (nil or null mean {}) and compacts
// it, keeping its key order: it is the input of instances, as a start's.
func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, fmt.Errorf("%w: input is not valid JSON: %w", ErrInvalidArgument, err)
	}
	return out.Bytes(), nil
}
