package main

import (
	"os"
	"testing"
)

// The schedule example of examples/schedules applies with
// `flowd schedule apply FILE` as docs/schedules.md says, on a server whose
// clock reads 2026-11-21T10:00:00Z: the next fire is 02:30 Paris time.
func TestScheduleApplyExample(t *testing.T) {
	b, _ := setupWorkersCLI(t)
	def, err := os.ReadFile("../../examples/schedules/daily-digest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.client.PutDefinition(t.Context(), "daily-digest", def); err != nil {
		t.Fatal(err)
	}
	res := b.run("", nil, "schedule", "apply", "../../examples/schedules/nightly-digest.schedule.yaml")
	if res.code != 0 || res.stdout != "schedule nightly-digest created, next fire 2026-11-22T01:30:00Z\n" {
		t.Fatalf("apply the example: %d %q %q", res.code, res.stdout, res.stderr)
	}
	s, err := b.client.GetSchedule(t.Context(), "nightly-digest")
	if err != nil {
		t.Fatal(err)
	}
	if s.Definition != "daily-digest" || s.Timezone != "Europe/Paris" || string(s.Input) != `{"recipients":"ops@example.com","scope":"daily"}` ||
		s.Overlap != "skip" || s.CatchupWindow != "10m0s" || s.Paused {
		t.Errorf("the example schedule as stored: %+v", s)
	}
}
