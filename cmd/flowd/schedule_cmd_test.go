package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
)

// TestScheduleCommands drives every schedule verb against a server whose
// engine reads the test's clock (2026-11-21T10:00:00Z), so the fire times
// in the goldens are fixed.
func TestScheduleCommands(t *testing.T) {
	b, _ := setupWorkersCLI(t)
	if _, _, err := b.client.PutDefinition(t.Context(), "report", []byte(`{"name": "report", "steps": [{"id": "a", "type": "task", "handler": "nobody"}]}`)); err != nil {
		t.Fatal(err)
	}
	b.golden("schedule-list-empty", 0, "", "schedule", "list")
	b.golden("schedule-apply-json", 0, `{"name": "nightly", "definition": "report", "cron": "30 2 * * *", "timezone": "Europe/Paris", "input": {"k": 1}}`,
		"schedule", "apply", "-")

	// A YAML file, replacing the schedule.
	file := filepath.Join(t.TempDir(), "nightly.yaml")
	yaml := "name: nightly\ndefinition: report\ncron: '30 2 * * *'\ntimezone: Europe/Paris\ninput:\n  k: 2\n  list: [a, {b: 1}]\noverlap: buffer_one\ncatchup_window: 5m\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	res := b.run("", nil, "schedule", "apply", file)
	if res.code != 0 || res.stdout != "schedule nightly replaced, next fire 2026-11-22T01:30:00Z\n" {
		t.Errorf("apply YAML: %d %q %q", res.code, res.stdout, res.stderr)
	}
	s, err := b.client.GetSchedule(t.Context(), "nightly")
	if err != nil || string(s.Input) != `{"k":2,"list":["a",{"b":1}]}` || s.Overlap != "buffer_one" || s.CatchupWindow != "5m0s" {
		t.Errorf("applied from YAML: %+v, %v", s, err)
	}

	b.golden("schedule-list", 0, "", "schedule", "list")
	b.golden("schedule-list-json", 0, "", "schedule", "list", "-o", "json")
	b.golden("schedule-get", 0, "", "schedule", "get", "nightly")
	b.golden("schedule-get-json", 0, "", "schedule", "get", "nightly", "-o", "json")
	b.golden("schedule-get-unknown", 4, "", "schedule", "get", "nope")
	b.golden("schedule-get-no-name", 2, "", "schedule", "get")
	b.golden("schedule-pause", 0, "", "schedule", "pause", "nightly")
	b.golden("schedule-resume", 0, "", "schedule", "resume", "nightly")
	b.golden("schedule-trigger", 0, "", "schedule", "trigger", "nightly")
	b.golden("schedule-trigger-again", 1, "", "schedule", "trigger", "nightly")
	b.golden("schedule-backfill", 0, "", "schedule", "backfill", "nightly", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-03T12:00:00Z")
	res = b.run("", nil, "schedule", "backfill", "nightly", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-03T12:00:00Z", "-o", "json")
	var bf api.BackfillResponse
	if err := json.Unmarshal([]byte(res.stdout), &bf); err != nil || res.code != 0 || len(bf.Created) != 0 || len(bf.Existing) != 3 {
		t.Errorf("repeated backfill -o json: %d %s %s", res.code, res.stdout, res.stderr)
	}
	b.golden("schedule-backfill-bad-time", 2, "", "schedule", "backfill", "nightly", "--from", "yesterday", "--to", "2026-11-03T12:00:00Z")
	b.golden("schedule-backfill-no-range", 2, "", "schedule", "backfill", "nightly")
	b.golden("schedule-apply-unknown-field", 2, `{"name": "bad", "definition": "report", "cron": "* * * * *", "crontab": "x"}`, "schedule", "apply", "-")
	b.golden("schedule-apply-no-name", 2, `{"definition": "report", "cron": "* * * * *"}`, "schedule", "apply", "-")
	b.golden("schedule-delete", 0, "", "schedule", "delete", "nightly")
	b.golden("schedule-delete-unknown", 4, "", "schedule", "delete", "nightly")

	// The instances stay after the delete.
	b.clock.Advance(time.Hour)
	if page, err := b.client.ListWorkflows(t.Context(), client.ListOptions{IDPrefix: "nightly-"}); err != nil || len(page.Workflows) != 4 {
		t.Errorf("instances of the deleted schedule: %+v, %v", page, err)
	}
}

// schedule apply lists every problem the server finds, one a line, as def
// apply does for a definition (exit 1: the server refused it).
func TestScheduleApplyListsEveryProblem(t *testing.T) {
	t.Parallel()
	b, _ := setupWorkersCLI(t)
	b.golden("schedule-apply-problems", exitError,
		`{"name": "bad", "cron": "61 * * * *", "timezone": "Mars/Base", "overlap": "queue", "catchup_window": "soon"}`,
		"schedule", "apply", "-")
}
