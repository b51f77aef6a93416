package workflow

import (
	"strconv"
	"strings"
)

// A code workflow runs as a function a worker serves. Each run of the
// function is the delivery of a run task, one row per stretch of the
// function between waits: RunStep(n) is the step id of the n-th, which no
// step of a state can take (a step name has no '/'), so that a run's row
// never collides with a step its code records.
const runStepPrefix = "flowd:run/"

// RunStep is the step id of the run task of the n-th stretch of a code
// workflow (n from 1).
func RunStep(n int) string { return runStepPrefix + strconv.Itoa(n) }

// ParseRunStep returns n of a run task's step id RunStep(n), and false for
// any other step id.
func ParseRunStep(step string) (n int, ok bool) {
	rest, ok := strings.CutPrefix(step, runStepPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// IsCode reports whether d is a code definition.
func (d *Definition) IsCode() bool { return d.Code != nil }
