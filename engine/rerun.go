package engine

import (
	"context"
	"fmt"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/workflow"
)

// ErrNotRerunnable: the instance cannot be re-run (it has not finished, it
// is free-form, or its language has no steps to start from): 409.
var ErrNotRerunnable = rules.ErrNotRerunnable

// RerunParams re-run a finished instance from a step (Rerun).
type RerunParams struct {
	// ID is the instance to re-run.
	ID string
	// From is the step of a flowd definition to re-run from; FromSeq, for
	// a code workflow, the seq of the first journal entry to record again.
	From    string
	FromSeq int
	// NewID is the re-run's id ("" for a new one).
	NewID string
}

// Rerun starts a new instance of the revision the finished instance p.ID
// ran, with its input, variables, priority and search attributes, that keeps the step
// records rules.RerunSteps keeps and runs the rest again: one create, like
// a start's, with its first tasks, linked to the original (rerun_of).
// Unknown instance: store.ErrNotFound; one that cannot be re-run:
// ErrNotRerunnable; a deleted revision: ErrDefinitionDeleted; a start that
// does not fit its definition: store.ErrInvalidArgument.
func (e *Engine) Rerun(ctx context.Context, p RerunParams) (*workflow.Instance, error) {
	orig, err := e.st.Get(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if orig.Definition == "" {
		return nil, fmt.Errorf("%w: workflow %s is free-form: it has no definition to run its steps again", ErrNotRerunnable, orig.ID)
	}
	c, err := e.compiled(ctx, orig.Definition, orig.DefinitionRevision)
	if err != nil {
		return nil, err
	}
	at := rules.RerunStart{From: p.From, FromSeq: p.FromSeq}
	steps, err := rules.RerunSteps(c, orig, at)
	if err != nil {
		return nil, err
	}
	state := orig.State.Clone()
	state.Steps = nil
	return e.createInstance(ctx, c, StartParams{
		ID: p.NewID, Definition: orig.Definition, Revision: orig.DefinitionRevision,
		Input: orig.Input, State: &state, Priority: orig.Priority, Search: orig.Search,
		rerun: &rerunStart{of: orig.ID, steps: steps, cause: rules.RerunCause(orig.ID, at)},
	}, false)
}
