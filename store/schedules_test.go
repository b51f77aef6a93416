package store

import (
	"errors"
	"strings"
	"testing"
)

// A bad schedule name is reported as a schedule name, whatever rule it
// shares with step ids.
func TestValidateScheduleNameNamesTheSchedule(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"bad sched", `schedule name "bad sched": only 1–111 characters of [A-Za-z0-9._-] are allowed`},
		{"", `schedule name "": only 1–111 characters of [A-Za-z0-9._-] are allowed`},
		{strings.Repeat("a", 112), "schedule name is 112 characters long, at most 111 are allowed"},
	} {
		err := ValidateScheduleName(tc.name)
		if !errors.Is(err, ErrInvalidArgument) || !strings.HasSuffix(err.Error(), ": "+tc.want) || strings.Contains(err.Error(), "step") {
			t.Errorf("ValidateScheduleName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := ValidateScheduleName("nightly.report-1"); err != nil {
		t.Errorf("a good name: %v", err)
	}
}
