package main

import (
	"testing"
	"time"
)

// flowd list --status QUEUED lists the instances waiting for a slot of
// their definition's concurrency limit; a retry over the limit fails
// (exit 1) saying why.
func TestCLIConcurrency(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	def := "name: one\nconcurrency: {key: '{{ .input.k }}', limit: 1}\nsteps:\n  - {id: w, type: wait}\n"
	if res := b.run(def, nil, "def", "apply", "-"); res.code != 0 {
		t.Fatalf("def apply: %+v", res)
	}
	for _, id := range []string{"c-1", "c-2", "c-3"} {
		if res := b.run("", nil, "start", "one", "--id", id, "--input", `{"k":"a"}`); res.code != 0 {
			t.Fatalf("start %s: %+v", id, res)
		}
		b.clock.Advance(time.Minute)
	}
	b.golden("list-queued", 0, "", "list", "--status", "queued")
	if res := b.run("", nil, "cancel", "c-3"); res.code != 0 {
		t.Fatalf("cancel of a QUEUED instance: %+v", res)
	}
}
