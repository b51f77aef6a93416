package instance

// The length of a state's stored form (MarshalJSON) is what the size
// limit and the history's snapshot policy measure. Measured by encoding,
// it costs the whole state: on a code workflow of thousands of steps, each
// checkpoint would cost its journal. A caller that knows the stored length
// of a state (the length of the write that stored it) works out the length
// after a change of a few records from it and the records changed (an
// Edit), without encoding the rest.

// Edit is a change of some of a state's step records and of its header
// (variables, extra members) in progress: BeginEdit before the change,
// End after it.
type Edit struct {
	s      *State
	base   int // the stored length before; 0: not known
	header int // the header's stored length before
	steps  []string
	old    []*StepState
	had    []bool
	count  int // the steps before
}

// BeginEdit starts a change of s, whose stored form is base bytes long (0:
// not known), that puts or deletes the records of steps and may change
// the header. A change of any other record must not be made within it.
func BeginEdit(s *State, base int, steps ...string) Edit {
	e := Edit{s: s, base: base, steps: steps}
	if base <= 0 {
		e.base = 0
		return e
	}
	e.header = s.headerLen()
	e.old, e.had, e.count = make([]*StepState, len(steps)), make([]bool, len(steps)), len(s.Steps)
	for i, id := range steps {
		e.old[i], e.had[i] = s.Steps[id]
	}
	return e
}

// End returns the stored length of the state as changed, worked out from
// the length before and the records the edit changed; 0 when the length
// before was not known.
func (e Edit) End() int {
	if e.base == 0 {
		return 0
	}
	s := e.s
	n := e.base - e.header + s.headerLen() - max(e.count-1, 0) + max(len(s.Steps)-1, 0)
	for i, id := range e.steps {
		if e.had[i] {
			n -= entryLen(id, e.old[i])
		}
		if st, ok := s.Steps[id]; ok {
			n += entryLen(id, st)
		}
	}
	return n
}

// Steps are the steps the edit may have changed
// (none: an empty list, not nil).
func (e Edit) Steps() []string {
	if e.steps == nil {
		return []string{}
	}
	return e.steps
}

// headerLen is the stored length of s without its steps' records
// ("steps" empty).
func (s State) headerLen() int {
	h := s
	h.Steps = nil
	b, err := h.appendJSON(nil, false)
	if err != nil {
		return 0
	}
	return len(b)
}

// entryLen is the stored length of step id's member of "steps", without
// the comma between members.
func entryLen(id string, st *StepState) int {
	n := len(appendString(nil, id)) + 1
	if st == nil {
		return n + len("null")
	}
	b, err := st.appendJSON(nil, false)
	if err != nil {
		return n
	}
	return n + len(b)
}
