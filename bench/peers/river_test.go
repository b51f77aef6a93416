package main

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestCheckOnceCountsMissedAndRepeatedJobs(t *testing.T) {
	calls := make([]atomic.Int32, 5)
	for i := range calls {
		calls[i].Store(1)
	}
	if bad := checkOnce(calls, discard); bad != 0 {
		t.Fatalf("every job once: %d bad, want 0", bad)
	}
	calls[1].Store(0)
	calls[3].Store(2)
	if bad := checkOnce(calls, discard); bad != 2 {
		t.Errorf("one job never run, one twice: %d bad, want 2", bad)
	}
}

func TestRiverJobProblems(t *testing.T) {
	for _, c := range []struct {
		name string
		jobs riverJobs
		want int64
	}{
		{"all completed at the first attempt", riverJobs{total: 10, completed: 10, completedFirstAttempt: 10}, 0},
		{"one left available", riverJobs{total: 10, completed: 9, completedFirstAttempt: 9}, 1},
		{"one retried", riverJobs{total: 10, completed: 10, completedFirstAttempt: 9}, 1},
		{"one missing", riverJobs{total: 9, completed: 9, completedFirstAttempt: 9}, 1},
		{"one extra", riverJobs{total: 11, completed: 11, completedFirstAttempt: 11}, 1},
	} {
		if got := c.jobs.problems(10, discard); got != c.want {
			t.Errorf("%s: %d problems, want %d", c.name, got, c.want)
		}
	}
}
