package store

import (
	"fmt"
	"slices"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/workflow"
)

// A step's record (state.steps.S: its status, attempts, output, error and
// a foreach step's bookkeeping) is stored in a row of its own, apart from
// the instance's row, which keeps the rest of the state with "steps"
// empty: a write stores the records of the steps it changed and the
// instance's header, never the records of the others again, so that the
// cost of a write does not grow with the number of steps before it. A
// read assembles the state from the header and the records.

// StepRecords is how a write stores a state: its header and the records
// it puts and drops.
type StepRecords struct {
	// Header is the state without its steps' records ("steps" empty), JSON.
	Header []byte
	// IDs are the steps whose records the write puts, in order; Records
	// their records, JSON; Existing whether each had a record in the state
	// the write moves from (replaced in place; else inserted, or, with
	// All, inserted or replaced).
	IDs      []string
	Records  [][]byte
	Existing []bool
	// Drop are the steps whose records the write deletes (a state
	// replaced without them).
	Drop []string
	// All says IDs are every step of the state, written without knowing
	// the stored records: any other stored record is deleted.
	All bool
}

// SplitState returns how to store next over prior, the state stored at
// the version the write moves from: the records of the steps that are
// new or differ from prior's, and the steps prior had that next has not.
// With no prior, every record is put (All). changed, when not nil (with a
// prior), names every step whose record may differ (Write.Changed): the
// others are not looked at, so that the split costs the change, not the
// state.
func SplitState(prior *workflow.State, next workflow.State, changed []string) (StepRecords, error) {
	header := next
	header.Steps = nil
	b, err := header.MarshalJSON()
	if err != nil {
		return StepRecords{}, fmt.Errorf("%w: %w", workflow.ErrInvalidState, err)
	}
	sr := StepRecords{Header: b, All: prior == nil}
	if prior == nil {
		changed = nil
	}
	var ids []string
	differs := func(id string, st *workflow.StepState) bool {
		// The same record (a decision shares the records it did not
		// change) is equal without comparing it.
		old, ok := prior.Steps[id]
		return !ok || old != st && !old.Equal(st)
	}
	if changed != nil {
		for _, id := range changed {
			if st, ok := next.Steps[id]; ok && differs(id, st) {
				ids = append(ids, id)
			}
		}
	} else {
		ids = make([]string, 0, len(next.Steps))
		for id, st := range next.Steps {
			if prior == nil || differs(id, st) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	sr.IDs, sr.Records, sr.Existing = ids, make([][]byte, len(ids)), make([]bool, len(ids))
	for i, id := range ids {
		if prior != nil {
			_, sr.Existing[i] = prior.Steps[id]
		}
		rec := []byte("null")
		if st := next.Steps[id]; st != nil {
			if rec, err = st.MarshalJSON(); err != nil {
				return StepRecords{}, fmt.Errorf("%w: state.steps.%s: %w", workflow.ErrInvalidState, id, err)
			}
		}
		sr.Records[i] = rec
	}
	if prior != nil {
		dropped := func(id string) {
			if _, ok := next.Steps[id]; !ok {
				sr.Drop = append(sr.Drop, id)
			}
		}
		if changed != nil {
			for _, id := range changed {
				if _, ok := prior.Steps[id]; ok {
					dropped(id)
				}
			}
		} else {
			for id := range prior.Steps {
				dropped(id)
			}
		}
		slices.Sort(sr.Drop)
		sr.Drop = slices.Compact(sr.Drop)
	}
	return sr, nil
}

// HistoryPatch returns the patch (jsondelta) that a history row stores to
// move the encoding of prior, the state of the version before, to next's:
// the changes of the header's members and, under "steps", the records of
// the steps that are new or differ, whole, and the deletion of the steps
// prior has and next has not. It is made from what the write changes, so
// that it costs that change, not the size of the state. ok false: no
// patch reproduces next's encoding (its header's keys are in an order
// jsondelta.Apply does not give); the version is then stored whole.
func HistoryPatch(prior, next *workflow.State, changed []string) (patch []byte, ok bool, err error) {
	sr, err := SplitState(prior, *next, changed)
	if err != nil {
		return nil, false, err
	}
	header := *prior
	header.Steps = nil
	ph, err := header.MarshalJSON()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", workflow.ErrInvalidState, err)
	}
	patch, ok, err = jsondelta.Diff(ph, sr.Header, jsondelta.Bytewise)
	if err != nil || !ok {
		return nil, ok, err
	}
	patch, err = jsondelta.WithMember(patch, "steps", jsondelta.ObjectPatch(sr.Drop, sr.IDs, sr.Records))
	return patch, err == nil, err
}

// HistoryPatchOf is HistoryPatch(prior, next) as jsondelta.Row asks for
// it, made only when the snapshot policy needs a patch; nil when there is
// no prior (the first version).
func HistoryPatchOf(prior, next *workflow.State, changed []string) func() ([]byte, bool, error) {
	if prior == nil {
		return nil
	}
	return func() ([]byte, bool, error) { return HistoryPatch(prior, next, changed) }
}
