package store

import (
	"fmt"
	"testing"

	"github.com/flowd/flowd/workflow"
)

// StoredState is the state a write stores, as a backend prepares it: its
// own copy, and its stored form (MarshalJSON), which the history's
// snapshot policy measures and a snapshot holds. When the caller worked
// out the form's length (Write.StateLen) the form is encoded only if a
// snapshot needs it, so that a write of a few records into a large state
// does not encode the rest.
type StoredState struct {
	State workflow.State
	len   int
	json  []byte
}

// PrepareState returns w.State as the backend stores it; w.Prepare has
// checked it.
func PrepareState(w *Write) (*StoredState, error) {
	if w.StateLen > 0 && w.Settled == "" {
		// The caller's state itself, handed over with the write (a copy
		// of its maps would cost every step): it is not encoded, so no
		// output is marked, and without a settled version nothing
		// changes it.
		return checked(w, &StoredState{State: w.State, len: w.StateLen})
	}
	// The write's own copy: Encode marks the outputs it has checked, and
	// the next write of the state, from the instance this one returns,
	// copies them.
	ss, err := EncodeState(w.State.Clone())
	if err != nil {
		return nil, err
	}
	return checked(w, ss)
}

// EncodeState returns s, the backend's own copy of a state, encoded.
func EncodeState(s workflow.State) (*StoredState, error) {
	b, err := s.Encode()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", workflow.ErrInvalidState, err)
	}
	return &StoredState{State: s, len: len(b), json: b}, nil
}

// checked returns s, after checking it in a test build: every test of a
// backend checks the length the caller worked out, and the steps it says
// it changed.
func checked(w *Write, s *StoredState) (*StoredState, error) {
	if testing.Testing() {
		if err := s.check(w); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Len is the length of the stored form.
func (s *StoredState) Len() int { return s.len }

// JSON is the stored form, encoded when first asked for.
func (s *StoredState) JSON() ([]byte, error) {
	if s.json == nil {
		b, err := s.State.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", workflow.ErrInvalidState, err)
		}
		s.json = b
	}
	return s.json, nil
}

// check is what a test build checks of a write that says what it changed:
// its length is the stored form's, and its Changed names every record
// that differs from Prior's.
func (s *StoredState) check(w *Write) error {
	b, err := s.JSON()
	if err != nil {
		return err
	}
	if w.StateLen > 0 && len(b) != w.StateLen {
		return fmt.Errorf("write of %s: StateLen %d, but the state's stored form is %d bytes", w.ID, w.StateLen, len(b))
	}
	if w.Changed == nil || w.Prior == nil {
		return nil
	}
	all, err := SplitState(w.Prior, s.State, nil)
	if err != nil {
		return err
	}
	some, err := SplitState(w.Prior, s.State, w.Changed)
	if err != nil {
		return err
	}
	if fmt.Sprint(all.IDs, all.Drop) != fmt.Sprint(some.IDs, some.Drop) {
		return fmt.Errorf("write of %s: Changed %q, but the records put and dropped are %q, %q", w.ID, w.Changed, all.IDs, all.Drop)
	}
	return nil
}
