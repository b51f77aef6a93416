package main

import "testing"

// `schedule get` of a schedule that fires several times a minute shows
// each fire time to the second, in UTC and in its time zone, so no two
// lines read alike.
func TestScheduleGetEvery(t *testing.T) {
	b, _ := setupWorkersCLI(t)
	if _, _, err := b.client.PutDefinition(t.Context(), "report", []byte(`{"name": "report", "steps": [{"id": "a", "type": "task", "handler": "nobody"}]}`)); err != nil {
		t.Fatal(err)
	}
	b.golden("schedule-apply-every", 0, `{"name": "often", "definition": "report", "cron": "@every 20s", "timezone": "Asia/Kolkata"}`,
		"schedule", "apply", "-")
	b.golden("schedule-get-every", 0, "", "schedule", "get", "often")
}
