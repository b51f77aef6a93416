package rules

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/store"
)

// A history cause names the iteration of a foreach step by its index (the
// .index of its templates), so that the history says which item a version
// was about.
func TestCausesNameTheIteration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		task       store.Task
		done, fail string
	}{
		{store.Task{StepID: "a", Attempt: 1}, `step "a" completed (attempt 1)`, `step "a" attempt 1 failed`},
		{store.Task{StepID: "fan", Iteration: 3, Attempt: 2}, `step "fan" iteration 2 completed (attempt 2)`, `step "fan" iteration 2 attempt 2 failed`},
		{store.Task{StepID: "fan", Iteration: 1, Attempt: 1}, `step "fan" iteration 0 completed (attempt 1)`, `step "fan" iteration 0 attempt 1 failed`},
	} {
		if got := CompletedCause(&c.task); got != c.done {
			t.Errorf("CompletedCause(step %s, iteration %d) = %q, want %q", c.task.StepID, c.task.Iteration, got, c.done)
		}
		if got, want := ChildStartedCause(&c.task, "kid"), strings.Replace(c.done, "completed", "started child workflow kid", 1); got != want {
			t.Errorf("ChildStartedCause(step %s, iteration %d) = %q, want %q", c.task.StepID, c.task.Iteration, got, want)
		}
		if got := FailedCause(&c.task); got != c.fail {
			t.Errorf("FailedCause(step %s, iteration %d) = %q, want %q", c.task.StepID, c.task.Iteration, got, c.fail)
		}
	}
}
