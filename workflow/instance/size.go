package instance

import (
	"errors"
	"fmt"
)

// ErrStateTooLarge: a change would make an instance's state document larger
// than the limit its server was given; nothing is written.
var ErrStateTooLarge = errors.New("state too large")

// StateTooLargeError is the error of CheckSize: errors.Is(err,
// ErrStateTooLarge), and errors.As gives the sizes.
type StateTooLargeError struct {
	Size, Max int
}

func (e *StateTooLargeError) Error() string {
	return fmt.Sprintf("the state would be %d bytes, more than the limit of %d bytes", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrStateTooLarge) hold.
func (e *StateTooLargeError) Is(target error) bool { return target == ErrStateTooLarge }

// CheckSize reports, with a *StateTooLargeError, a state whose
// stored form (MarshalJSON) is larger than max bytes; max <= 0 means no
// limit.
//
// The stored form is only written out when it could be too large: every
// byte of a string or raw value takes at most six once encoded (\u00XX) and
// every entry a bounded number of separators, so a state whose bound stays
// within max is accepted by adding up lengths, without encoding it. Only a
// state whose content passes about a sixth of the limit is encoded once more
// to be measured exactly.
func (s State) CheckSize(max int) error {
	if max <= 0 || s.sizeBound() <= max {
		return nil
	}
	b, err := s.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	if len(b) > max {
		return &StateTooLargeError{Size: len(b), Max: max}
	}
	return nil
}

// CheckLen is CheckSize of a state whose stored form is n bytes long.
func CheckLen(n, max int) error {
	if max > 0 && n > max {
		return &StateTooLargeError{Size: n, Max: max}
	}
	return nil
}

// escapeFactor is the most bytes one input byte of a string or raw value
// becomes in the stored form: an escape \u00XX, or \ufffd for a byte of
// invalid UTF-8.
const escapeFactor = 6

// entryOverhead bounds what an object member adds besides its key and
// value: quotes, colon, comma.
const entryOverhead = 4

// sizeBound is an upper bound of len(s.MarshalJSON()), in time linear in
// the number of entries (not bytes). An output Encode marked counts as
// its length, which is what it takes encoded: the bound of a long
// workflow whose outputs were written before stays close to its size.
func (s State) sizeBound() int { return s.measure(escapeFactor) }

// sizeHint is about the length of s.MarshalJSON(), a little more for
// values written as they are: the buffer the encoder writes into is
// allocated once instead of growing, and copying itself, about twenty
// times for a state of a few megabytes.
func (s State) sizeHint() int { return s.measure(1) }

// measure adds up the lengths of s's keys and values, each byte of a
// string or raw value counted per times (an output Encode marked once),
// and what the encoding adds around them.
func (s State) measure(per int) int {
	n := len(`{"steps":{},"variables":{}}`) + rawMapMeasure(s.Variables, per) + rawMapMeasure(s.Extra, per)
	for id, st := range s.Steps {
		n += per*len(id) + entryOverhead + len("null")
		if st == nil {
			continue
		}
		// {"attempts":N,"error":"…","output":…,"status":"…"} and Extra.
		n += len(`{"attempts":-9223372036854775808,"error":"","output":,"status":""}`) + 3*entryOverhead
		n += per*(len(st.Error)+len(st.Status)) + len("null") + rawMapMeasure(st.Extra, per)
		if st.outputWritten() {
			n += len(st.Output) // written out as it is
		} else {
			n += per * len(st.Output)
		}
	}
	return n
}

func rawMapMeasure[V ~[]byte](m map[string]V, per int) int {
	n := 0
	for k, v := range m {
		n += per*(len(k)+len(v)) + entryOverhead + len("null")
	}
	return n
}
