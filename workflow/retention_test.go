package workflow

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// retention is absent (the server's applies), a duration, or 0 (keep for
// ever), and the stored canonical form keeps that difference.
func TestRetention(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		doc  string
		want *time.Duration
	}{
		{"name: r\nsteps: [{id: a, type: wait}]", nil},
		{"name: r\nretention: 720h\nsteps: [{id: a, type: wait}]", ptrTo(720 * time.Hour)},
		{"name: r\nretention: 90m\nsteps: [{id: a, type: wait}]", ptrTo(90 * time.Minute)},
		{"name: r\nretention: 0\nsteps: [{id: a, type: wait}]", ptrTo(time.Duration(0))},
		{`{"name": "r", "retention": "0s", "steps": [{"id": "a", "type": "wait"}]}`, ptrTo(time.Duration(0))},
		{`{"name": "r", "retention": null, "steps": [{"id": "a", "type": "wait"}]}`, nil},
	} {
		d := mustParse(t, c.doc)
		if !sameDuration(d.Retention, c.want) {
			t.Errorf("%s: retention %v, want %v", c.doc, d.Retention, c.want)
		}
		canon, err := d.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		again := mustParse(t, string(canon))
		if !sameDuration(again.Retention, c.want) {
			t.Errorf("%s: canonical %s reads back retention %v, want %v", c.doc, canon, again.Retention, c.want)
		}
		if c.want != nil && *c.want == 0 && !strings.Contains(string(canon), `"retention":"0s"`) {
			t.Errorf("%s: canonical %s drops retention 0", c.doc, canon)
		}
	}
}

// An invalid retention is a problem of the definition, said plainly: days
// are not a Go duration unit, so 30d says what to write instead.
func TestRetentionInvalid(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]string{
		`"30d"`:   `retention: invalid duration "30d" (want a Go duration such as "30s", "10m" or "1h30m"; its largest unit is h: 720h is 30 days)`,
		`"-1h"`:   `retention: duration "-1h" must not be negative`,
		`"soon"`:  `retention: invalid duration "soon" (want a Go duration such as "30s", "10m" or "1h30m")`,
		`5`:       `retention: want a duration string with a unit such as "30s", "10m" or "1h30m", not 5`,
		`true`:    `retention: want a duration string with a unit such as "30s", "10m" or "1h30m", not true`,
		`{"d":1}`: `retention: want a duration string with a unit such as "30s", "10m" or "1h30m", not an object`,
	} {
		_, err := ParseDefinition([]byte(`{"name": "r", "retention": ` + value + `, "steps": [{"id": "a", "type": "wait"}]}`))
		var de *DefinitionError
		if !errors.As(err, &de) || len(de.Problems) != 1 || de.Problems[0] != want {
			t.Errorf("retention %s: %v, want the one problem %q", value, err, want)
		}
	}
}

func ptrTo(d time.Duration) *time.Duration { return &d }

func sameDuration(got *Duration, want *time.Duration) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return time.Duration(*got) == *want
}
