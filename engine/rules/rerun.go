package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A re-run is a new instance of the revision an instance ran, with the
// same input and variables, that keeps what the original did up to a point
// and runs the rest again. What it keeps is decided here; the engine starts
// it as it starts any instance (Start), from the records kept.

// ErrNotRerunnable: the instance cannot be re-run (it still runs, it has
// no definition, its language has no steps to start from).
var ErrNotRerunnable = errors.New("cannot re-run")

// RerunStart is where a re-run starts: From, a step of a flowd definition,
// or FromSeq, a journal position of a code workflow.
type RerunStart struct {
	From    string
	FromSeq int
}

// RerunSteps returns the step records a re-run of orig (an instance of c)
// starts with.
//
// A flowd definition is re-run from step From: the steps that do not
// depend on it (transitively) keep their records when they COMPLETED or
// were SKIPPED in the original — they do not run again, and a skip stays
// a skip, as its reasons (the outputs and variables before it) are kept;
// From, every step that depends on it, and every other step (one that
// failed, was cancelled or never ran) start PENDING and run as a start
// schedules them. A foreach step runs all its items again; a workflow
// step starts a new child.
//
// A code workflow is re-run from FromSeq: its journal keeps the entries
// recorded before that seq that COMPLETED (the replay takes them); the
// others are forgotten and the function records them again.
//
// The original must have finished (COMPLETED, FAILED, CANCELLED or
// TIMED_OUT): ErrNotRerunnable otherwise, and for a Serverless Workflow
// instance. A start that does not fit the language, or names a step the
// definition lacks, is an ErrInvalidArgument naming what is known.
func RerunSteps(c *Definition, orig *workflow.Instance, at RerunStart) (map[string]*workflow.StepState, error) {
	if !orig.Status.StopsSteps() {
		return nil, fmt.Errorf("%w: workflow %s is %s: only a finished workflow (COMPLETED, FAILED, CANCELLED or TIMED_OUT) can be re-run", ErrNotRerunnable, orig.ID, orig.Status)
	}
	switch c.Language.(type) {
	case dag:
		if at.FromSeq != 0 || at.From == "" {
			return nil, fmt.Errorf(`%w: workflow %s runs flowd steps: give "from", the step to re-run from (one of %s)`, store.ErrInvalidArgument, orig.ID, knownSteps(c))
		}
		return rerunDAG(c, orig, at.From)
	case code:
		if at.From != "" || at.FromSeq < 1 {
			return nil, fmt.Errorf(`%w: workflow %s is a code workflow: give "from_seq", the seq of the first journal entry to record again (1 or more)`, store.ErrInvalidArgument, orig.ID)
		}
		return rerunCode(orig, at.FromSeq), nil
	}
	return nil, fmt.Errorf("%w: workflow %s runs a Serverless Workflow document, which has no steps to re-run from", ErrNotRerunnable, orig.ID)
}

// knownSteps lists c's steps for a message, in definition order.
func knownSteps(c *Definition) string {
	ids := make([]string, len(c.Def.Steps))
	for i, s := range c.Def.Steps {
		ids[i] = s.ID
	}
	return strings.Join(ids, ", ")
}

func rerunDAG(c *Definition, orig *workflow.Instance, from string) (map[string]*workflow.StepState, error) {
	if _, ok := c.Def.Step(from); !ok {
		return nil, fmt.Errorf("%w: definition %s has no step %q (its steps: %s)", store.ErrInvalidArgument, c.Def.Name, from, knownSteps(c))
	}
	again := map[string]bool{from: true}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		for _, d := range c.Def.Dependents(queue[0]) {
			if !again[d] {
				again[d] = true
				queue = append(queue, d)
			}
		}
	}
	steps, kept := c.Def.InitialState().Steps, orig.State.Clone().Steps
	for id := range steps {
		st := kept[id]
		if again[id] || st == nil || st.Status != workflow.StepCompleted && st.Status != workflow.StepSkipped {
			continue
		}
		steps[id] = st
	}
	return steps, nil
}

func rerunCode(orig *workflow.Instance, from int) map[string]*workflow.StepState {
	steps := orig.State.Clone().Steps
	for id, st := range steps {
		if st == nil || st.Status != workflow.StepCompleted || entrySeq(st) >= from {
			delete(steps, id)
		}
	}
	return steps
}

// entrySeq is the seq a code workflow's entry was recorded with (0 for
// none).
func entrySeq(st *workflow.StepState) int {
	var n int
	if raw, ok := st.Extra["seq"]; ok {
		_ = json.Unmarshal(raw, &n)
	}
	return n
}

// entryFinished is the order a wait entry finished in (0 for none).
func entryFinished(st *workflow.StepState) int {
	var n int
	if raw, ok := st.Extra["finished"]; ok {
		_ = json.Unmarshal(raw, &n)
	}
	return n
}

// journalCounts are the last seq and finished numbers of the entries a
// code workflow starts with (none on a start; those kept on a re-run),
// which its next entries follow.
func journalCounts(steps map[string]*workflow.StepState) (seq, finished int) {
	for _, st := range steps {
		seq = max(seq, entrySeq(st))
		finished = max(finished, entryFinished(st))
	}
	return seq, finished
}

// RerunCause is the history cause of a re-run's first version.
func RerunCause(orig string, at RerunStart) string {
	if at.From != "" {
		return fmt.Sprintf("re-run of %s from step %q", orig, at.From)
	}
	return fmt.Sprintf("re-run of %s from seq %d", orig, at.FromSeq)
}
