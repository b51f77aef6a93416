// Package schedule computes when a schedule fires: it parses a schedule's
// `cron` (a 5-field cron expression, `@every D`, `@hourly` or `@daily`) and
// `timezone`, and gives its fire times. It is pure: no clock, no I/O.
//
// Cron fields are matched against the wall clock of the schedule's time
// zone, with two rules for the days a daylight-saving change skips or
// repeats local times (the rules of most cron implementations):
//
//   - a local time that does not exist (skipped by a spring-forward change,
//     such as 02:30 on 2026-03-29 in Europe/Paris) fires once, at the first
//     instant after the gap (03:00 local, the instant of the change);
//   - a local time that exists twice (repeated by a fall-back change, such as
//     02:30 on 2026-10-25 in Europe/Paris) fires once, at its first
//     occurrence (02:30 +02:00).
//
// `@every D` fires at the whole multiples of D since 1970-01-01T00:00:00Z, in
// any zone: the fire times of a schedule do not depend on when a node
// started, so every node computes the same ones.
package schedule

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	// The IANA database is embedded so that a machine without zoneinfo
	// files still resolves every time zone name.
	_ "time/tzdata"

	"github.com/adhocore/gronx"
)

// MinEvery is the shortest `@every` interval.
const MinEvery = time.Second

// MaxEvery is the longest `@every` interval, ten years. Fire times are
// computed as nanoseconds since 1970, which end in April 2262 (lastFire):
// a longer interval would reach that end within the few fire times a
// schedule shows, and is more likely a typo than a schedule.
const MaxEvery = 10 * 365 * 24 * time.Hour

// lastFire is the last instant a fire time can be: the largest time.Time
// whose UnixNano is defined.
var lastFire = time.Unix(0, math.MaxInt64).UTC()

// macros are the `@` forms a schedule's cron may use besides `@every`.
var macros = map[string]string{
	"@hourly": "0 * * * *",
	"@daily":  "0 0 * * *",
}

// ErrInvalid is matched (errors.Is) by every error of Parse and LoadZone.
var ErrInvalid = errors.New("invalid schedule")

// Error lists every problem Parse found in a cron expression and a time
// zone, so that one answer names them all.
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return ErrInvalid.Error() + ": " + strings.Join(e.Problems, "; ") }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Cron is a parsed schedule: its fire times in its zone.
type Cron struct {
	expr  string         // the 5-field expression; "" for @every
	every time.Duration  // > 0 for @every
	loc   *time.Location // the zone the fields are matched in
}

// Parse checks expr and zone ("" means UTC) and returns the schedule they
// describe. The error is an *Error naming every problem of both.
func Parse(expr, zone string) (*Cron, error) {
	var problems []string
	c := &Cron{}
	if err := c.parseExpr(strings.TrimSpace(expr)); err != "" {
		problems = append(problems, err)
	}
	loc, err := loadZone(zone)
	if err != "" {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	c.loc = loc
	return c, nil
}

// parseExpr sets c's expression or interval from expr, or says what is
// wrong with it.
func (c *Cron) parseExpr(expr string) (problem string) {
	switch {
	case expr == "":
		return "cron is empty"
	case strings.HasPrefix(expr, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every")))
		if err != nil {
			return fmt.Sprintf("cron %q: @every takes a Go duration such as 30s or 1h30m: %v", expr, err)
		}
		if d < MinEvery {
			return fmt.Sprintf("cron %q: @every needs a duration of at least %s", expr, MinEvery)
		}
		if d > MaxEvery {
			return fmt.Sprintf("cron %q: @every takes at most %s (10 years): fire times further apart would soon pass %s, the last date flowd computes",
				expr, MaxEvery, lastFire.Format(time.RFC3339))
		}
		if d%time.Microsecond != 0 {
			// Fire times are stored to the microsecond.
			return fmt.Sprintf("cron %q: @every needs a whole number of microseconds", expr)
		}
		c.every = d
		return ""
	case strings.HasPrefix(expr, "@"):
		m, ok := macros[expr]
		if !ok {
			return fmt.Sprintf("cron %q: the @ forms are @every D, @hourly and @daily", expr)
		}
		c.expr = m
	default:
		if n := len(strings.Fields(expr)); n != 5 {
			return fmt.Sprintf("cron %q has %d fields; it needs 5 (minute hour day-of-month month day-of-week)", expr, n)
		}
		if !gronx.IsValid(expr) {
			return fmt.Sprintf("cron %q is not a valid 5-field cron expression", expr)
		}
		c.expr = strings.Join(strings.Fields(expr), " ")
	}
	// An expression that never matches (30 February) is refused here
	// rather than leaving a schedule that silently never fires. The
	// fields match the same way in every zone.
	probe := Cron{expr: c.expr, loc: time.UTC}
	if _, err := probe.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		return fmt.Sprintf("cron %q never fires", expr)
	}
	return ""
}

// LoadZone returns the IANA time zone name ("" means UTC). "Local" is
// refused: it would mean a different zone on each node. The error is an
// *Error.
func LoadZone(name string) (*time.Location, error) {
	loc, problem := loadZone(name)
	if problem != "" {
		return nil, &Error{Problems: []string{problem}}
	}
	return loc, nil
}

func loadZone(name string) (loc *time.Location, problem string) {
	if name == "" {
		return time.UTC, ""
	}
	if name == "Local" {
		return nil, `timezone "Local" depends on the machine; name an IANA zone such as Europe/Paris`
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("timezone %q is not an IANA time zone name (such as UTC or Europe/Paris): %v", name, err)
	}
	return loc, ""
}

// Location is the zone the schedule's fields are matched in.
func (c *Cron) Location() *time.Location { return c.loc }

// Every is the interval of an `@every` schedule, 0 for a cron expression.
func (c *Cron) Every() time.Duration { return c.every }

// Next returns the first fire time strictly after after, in the schedule's
// zone. The error is gronx's when no fire time is found (an expression that
// never matches), and wraps ErrInvalid when an `@every` fire time would be
// outside the instants flowd computes (1677 to 2262): never a time that
// wrapped around.
func (c *Cron) Next(after time.Time) (time.Time, error) {
	if c.every > 0 {
		return c.nextEvery(after)
	}
	// gronx steps through the fields on a clock without daylight-saving
	// changes (the wall clock of the zone written as UTC); each wall time it
	// finds is then resolved to an instant by the rules in the package
	// comment. A resolved instant not after after (the first occurrence of
	// a repeated time when after is in its second one, or the end of a gap
	// already fired) is passed over.
	wall := wallClock(after.In(c.loc))
	for range 1000 {
		next, err := gronx.NextTickAfter(c.expr, wall, false)
		if err != nil {
			return time.Time{}, fmt.Errorf("cron %q: no next fire time after %s: %w", c.expr, after.Format(time.RFC3339), err)
		}
		if t := resolve(next, c.loc); t.After(after) {
			return t, nil
		}
		wall = next
	}
	return time.Time{}, fmt.Errorf("cron %q: no next fire time after %s", c.expr, after.Format(time.RFC3339))
}

// nextEvery is Next of an `@every` schedule: the first whole multiple of
// the interval since 1970 after after.
func (c *Cron) nextEvery(after time.Time) (time.Time, error) {
	first := time.Unix(0, math.MinInt64)
	if after.Before(first) || !after.Before(lastFire) {
		return time.Time{}, fmt.Errorf("%w: cron \"@every %s\": %s is outside the dates flowd computes fire times for (%s to %s)",
			ErrInvalid, c.every, after.UTC().Format(time.RFC3339), first.UTC().Format(time.RFC3339), lastFire.Format(time.RFC3339))
	}
	ns, every := after.UnixNano(), int64(c.every)
	n := ns / every
	if ns < 0 && ns%every != 0 {
		n-- // floor, not truncation towards zero
	}
	if n+1 > math.MaxInt64/every {
		return time.Time{}, fmt.Errorf("%w: cron \"@every %s\": the next fire time after %s would pass %s, the last date flowd computes",
			ErrInvalid, c.every, after.UTC().Format(time.RFC3339), lastFire.Format(time.RFC3339))
	}
	return time.Unix(0, (n+1)*every).In(c.loc), nil
}

// NextN returns the n fire times after after.
func (c *Cron) NextN(after time.Time, n int) ([]time.Time, error) {
	out := make([]time.Time, 0, n)
	for range n {
		t, err := c.Next(after)
		if err != nil {
			return out, err
		}
		out = append(out, t)
		after = t
	}
	return out, nil
}

// wallClock is t's wall clock in its zone, written as a UTC time.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// resolve returns the instant at which the wall time w (written as UTC)
// happens in loc: the instant ending the gap when w does not exist there,
// the first of the two when it exists twice.
func resolve(w time.Time, loc *time.Location) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	if got := wallClock(t); !got.Equal(w) {
		// w is in a gap; time.Date moved it to one side of the change,
		// whose instant is the zone boundary on that side.
		start, end := t.ZoneBounds()
		if got.After(w) {
			return start
		}
		return end
	}
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t
	}
	_, off := t.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	if before > off {
		// The clock went back at start: w may also have happened in the
		// zone before, an hour (or so) earlier.
		if earlier := t.Add(-time.Duration(before-off) * time.Second); earlier.Before(start) && wallClock(earlier.In(loc)).Equal(w) {
			return earlier
		}
	}
	return t
}
