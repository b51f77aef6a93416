package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNextDaylightSaving is the rule for local times a daylight-saving
// change skips or repeats: a skipped time fires once at the end of the gap,
// a repeated one once at its first occurrence.
func TestNextDaylightSaving(t *testing.T) {
	for _, tc := range []struct {
		name, cron, zone, after string
		want                    []string
	}{
		{"spring forward: 02:30 does not exist, fires at 03:00 +02:00", "30 2 * * *", "Europe/Paris", "2026-03-28T02:30:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"fall back: 02:30 exists twice, fires at the first", "30 2 * * *", "Europe/Paris", "2026-10-24T02:30:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"fall back: from the second 02:15, the second 02:30 does not fire", "30 2 * * *", "Europe/Paris", "2026-10-25T02:15:00+01:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		{"fall back: between the two 02:30", "30 2 * * *", "Europe/Paris", "2026-10-25T02:45:00+02:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		{"hourly on spring forward: 02:00 and 03:00 are one instant, fired once", "0 * * * *", "Europe/Paris", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"hourly on fall back: the repeated hour fires once", "0 * * * *", "Europe/Paris", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"}},
		{"New York spring forward", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"UTC default", "0 4 25 11 *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-11-25T04:00:00Z", "2027-11-25T04:00:00Z"}},
		{"@daily in a zone", "@daily", "Asia/Tokyo", "2026-11-25T10:00:00Z",
			[]string{"2026-11-25T15:00:00Z", "2026-11-26T15:00:00Z"}},
		{"@hourly", "@hourly", "", "2026-11-25T04:00:00Z",
			[]string{"2026-11-25T05:00:00Z", "2026-11-25T06:00:00Z"}},
		{"@every from the epoch, not from after", "@every 90m", "Europe/Paris", "2026-11-25T04:10:00Z",
			[]string{"2026-11-25T04:30:00Z", "2026-11-25T06:00:00Z"}},
		{"@every 1s", "@every 1s", "", "2026-11-25T04:00:00.5Z",
			[]string{"2026-11-25T04:00:01Z", "2026-11-25T04:00:02Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.cron, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			after, err := time.Parse(time.RFC3339Nano, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.NextN(after, len(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				if !got[i].Equal(mustTime(t, w)) {
					t.Errorf("fire %d = %s, want %s (all: %v)", i, got[i].Format(time.RFC3339), w, got)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ cron, zone, want string }{
		{"", "", "cron is empty"},
		{"* * * *", "", "has 4 fields"},
		{"0 * * * * *", "", "has 6 fields"},
		{"61 * * * *", "", "not a valid 5-field cron expression"},
		{"a b c d e", "", "not a valid"},
		{"0 0 30 2 *", "", "never fires"},
		{"@every 500ms", "", "at least 1s"},
		{"@every soon", "", "Go duration"},
		{"@every 1.0000001s", "", "whole number of microseconds"},
		{"@every 1000000h", "", "@every takes at most 87600h0m0s (10 years)"},
		{"@every 2562047h", "", "the last date flowd computes"},
		{"@weekly", "", "the @ forms are"},
		{"* * * * *", "Mars/Olympus", "not an IANA time zone"},
		{"* * * * *", "Local", "depends on the machine"},
	} {
		_, err := Parse(tc.cron, tc.zone)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q, %q) = %v, want ErrInvalid saying %q", tc.cron, tc.zone, err, tc.want)
		}
	}
}

// A bad cron and a bad zone are both named, in one error.
func TestParseNamesEveryProblem(t *testing.T) {
	_, err := Parse("61 * * * *", "Mars/Olympus")
	var se *Error
	if !errors.As(err, &se) || len(se.Problems) != 2 ||
		!strings.Contains(se.Problems[0], `cron "61 * * * *" is not a valid`) || !strings.Contains(se.Problems[1], `timezone "Mars/Olympus"`) {
		t.Errorf("Parse of a bad cron in a bad zone = %v, want both problems", err)
	}
}

// An @every fire time never wraps around past the last instant flowd
// computes (2262): the next fire time there is an error, and the longest
// interval gives fire times in order for the next two centuries.
func TestEveryNeverWraps(t *testing.T) {
	longest, err := Parse("@every 87600h", "")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := longest.NextN(from, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range got {
		if !f.After(from) || i > 0 && !f.After(got[i-1]) {
			t.Fatalf("fire times %v are not in order after %s", got, from)
		}
	}
	for _, after := range []time.Time{
		time.Date(2260, 1, 1, 0, 0, 0, 0, time.UTC), // the next multiple passes 2262
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), // past the last instant
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), // before the first
	} {
		next, err := longest.Next(after)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "flowd computes") {
			t.Errorf("Next(%s) = %s, %v; want an ErrInvalid naming the range", after, next, err)
		}
	}
}
