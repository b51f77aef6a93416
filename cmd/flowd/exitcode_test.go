package main

import "testing"

// A 400 of the server exits 1 with the server's message, whatever words the
// message holds; exit 2 is for the CLI's own argument and flag errors,
// found before any request.
func TestServerBadRequestIsAnError(t *testing.T) {
	t.Parallel()
	b, _ := setupWorkersCLI(t)
	def := "name: per-customer\nconcurrency: {key: '{{ .input.customer }}', limit: 1}\nsteps:\n  - {id: w, type: wait}\n"
	if res := b.run(def, nil, "def", "apply", "-"); res.code != 0 {
		t.Fatalf("def apply: %+v", res)
	}
	b.golden("start-concurrency-key-missing", exitError, "", "start", "per-customer", "--input", "{}")
	b.golden("schedule-apply-bad-cron", exitError, `{"name": "bad", "definition": "per-customer", "cron": "61 * * * *"}`, "schedule", "apply", "-")
}
