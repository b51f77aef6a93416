package instance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Domain errors. Stores and the API wrap them; test with errors.Is.
var (
	// ErrInvalidState: a state document breaks the rules (bad step id, bad step status, …).
	ErrInvalidState = errors.New("invalid state")
	// ErrInvalidTransition: from → to is not in the transition table.
	ErrInvalidTransition = errors.New("transition not allowed")
	// ErrTerminal: the instance is COMPLETED or CANCELLED and cannot change any more.
	ErrTerminal = errors.New("instance is terminal")
	// ErrUnknownStep: the step id is not a key of state.steps.
	ErrUnknownStep = errors.New("unknown step")
	// ErrStepCompleted: the step is already COMPLETED; completing it again is refused.
	ErrStepCompleted = errors.New("step already completed")
)

// Instance is one workflow instance: its status, state document and version.
// Version starts at 0 and every change increases it by exactly 1.
type Instance struct {
	ID         string          `json:"id"`
	Definition string          `json:"definition"`
	Status     Status          `json:"status"`
	State      State           `json:"state"`
	Input      json.RawMessage `json:"input"`
	Version    int64           `json:"version"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	// DefinitionRevision is the definition revision the instance started with
	// (0 for a free-form instance); Deadline is when the workflow timeout moves
	// it to TIMED_OUT (nil: no timeout).
	DefinitionRevision int        `json:"definition_revision,omitempty"`
	Deadline           *time.Time `json:"deadline,omitempty"`
	// Output is what a definition-based instance gave when it completed
	// (its definition's output template rendered, or the outputs of its
	// final steps); absent until then, and for an instance completed
	// otherwise (a free-form one, a status forced through the API).
	Output json.RawMessage `json:"output,omitempty"`
	// Parent is the step that started the instance as a child workflow
	// (nil for an instance started otherwise).
	Parent *ParentRef `json:"parent,omitempty"`
	// TraceParent is the W3C traceparent of the trace the instance was
	// started in ("" for none): its steps' attempts join that trace.
	// Not part of the API's instance document.
	TraceParent string `json:"-"`
	// Priority (1–5) is the start's priority, or its definition's; its
	// tasks are claimed in that order. 0 for a free-form instance.
	Priority int `json:"priority,omitempty"`
	// RerunOf is the instance this one re-runs from a step ("" for an
	// instance started otherwise); Reruns, shown by the single-instance
	// read alone, are the newest re-runs of this one.
	RerunOf string   `json:"rerun_of,omitempty"`
	Reruns  []string `json:"reruns,omitempty"`
	// Error is the error object of a FAILED Serverless Workflow instance
	// ({"type", "status", "title"?, "detail"?, "instance"}), taken from
	// its state when the instance is shown (ShowError); absent otherwise.
	Error json.RawMessage `json:"error,omitempty"`
	// Search are the instance's search attributes: name → a string, a
	// number or a boolean (see CheckSearch); absent for none. Filled by
	// the store's Get and List.
	Search map[string]json.RawMessage `json:"search,omitempty"`
}

// ServerlessStateKey is the top-level key of a Serverless Workflow
// instance's state that holds its interpreter's runtime; the runtime's
// "error" member is the error the instance faulted with.
const ServerlessStateKey = "sw"

// CodeStateKey is the top-level key of a code workflow's state that holds
// the bookkeeping of its runs (which run is current, whether it waits, the
// last seq, the error it failed with).
const CodeStateKey = "code"

// ShowError sets Error from the state of a FAILED instance.
func (i *Instance) ShowError() {
	if i.Status != StatusFailed {
		return
	}
	raw, ok := i.State.Extra[ServerlessStateKey]
	if !ok {
		return
	}
	var rt struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &rt) == nil && len(rt.Error) > 0 && string(rt.Error) != "null" {
		i.Error = rt.Error
	}
}

// State is an instance's state document. Variables and Steps are the keys the
// engine uses; every other top-level key is kept, byte for byte, in Extra.
//
// Values are json.RawMessage rather than `any` so that numbers survive a round
// trip exactly: decoding into float64 would silently change large integers.
type State struct {
	Variables map[string]json.RawMessage
	Steps     map[string]*StepState
	Extra     map[string]json.RawMessage
}

// StepState is one entry of state.steps. Keys other than the known ones are kept
// in Extra.
type StepState struct {
	Status StepStatus
	// Output is replaced, never changed in place: Clone shares it, and
	// the encoder remembers an output it has checked by the slice (see
	// written).
	Output   json.RawMessage
	Error    string
	Attempts int
	Extra    map[string]json.RawMessage

	// written is Output when State.Encode found that it is written out
	// as it is (valid, compact, HTML characters escaped): encoding the
	// step again copies it instead of checking it again, so that a write
	// of a state with many steps does not scan the outputs it did not
	// change. An Output assigned since is another slice, and the mark no
	// longer applies.
	written json.RawMessage
}

// Var decodes variable name into v and reports whether it was present.
func (s *State) Var(name string, v any) (bool, error) {
	raw, ok := s.Variables[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("variable %q: %w", name, err)
	}
	return true, nil
}

// SetVar stores v, encoded as JSON, as variable name.
func (s *State) SetVar(name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("variable %q: %w", name, err)
	}
	if s.Variables == nil {
		s.Variables = map[string]json.RawMessage{}
	}
	s.Variables[name] = raw
	return nil
}

// Validate checks the rules every stored state obeys: step ids are valid and step
// entries have a known status and non-negative attempts.
func (s *State) Validate() error { return s.ValidateSteps(sortedKeys(s.Steps)...) }

// ValidateSteps is Validate of the steps ids alone (those a change put:
// the others were valid before it). A step ids names that s has not is
// not checked.
func (s *State) ValidateSteps(ids ...string) error {
	for _, id := range ids {
		st, ok := s.Steps[id]
		if !ok {
			continue
		}
		if err := ValidateStepKey(id); err != nil {
			return fmt.Errorf("%w: state.steps: %w", ErrInvalidState, err)
		}
		if st == nil {
			return fmt.Errorf("%w: state.steps.%s must be an object", ErrInvalidState, id)
		}
		if !st.Status.Valid() {
			return fmt.Errorf("%w: state.steps.%s.status %q is not a step status (want one of %v)", ErrInvalidState, id, st.Status, StepStatuses)
		}
		if st.Attempts < 0 {
			return fmt.Errorf("%w: state.steps.%s.attempts must not be negative", ErrInvalidState, id)
		}
	}
	return nil
}

// CompleteStep marks step id COMPLETED with output. It refuses an unknown step
// (ErrUnknownStep) and one already completed (ErrStepCompleted) instead of
// overwriting it.
func (s *State) CompleteStep(id string, output json.RawMessage) error {
	st, ok := s.Steps[id]
	if !ok || st == nil {
		return fmt.Errorf("%w: %q", ErrUnknownStep, id)
	}
	if st.Status == StepCompleted {
		return fmt.Errorf("%w: %q", ErrStepCompleted, id)
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	st.Status = StepCompleted
	st.Output = output
	st.Error = ""
	return nil
}

// CancelActiveSteps marks every RUNNING or WAITING step CANCELLED and
// reports whether it changed any. It is applied, in the same write, when an
// instance moves to a status that stops its steps (Status.StopsSteps); other
// steps (PENDING ones included) keep their status, output and error.
func (s *State) CancelActiveSteps() bool {
	changed := false
	for id, st := range s.Steps {
		if st != nil && st.Status.Active() {
			// A new record, not the one changed in place: a record may be
			// shared with the state this one was copied from.
			c := *st
			c.Status = StepCancelled
			s.Steps[id] = &c
			changed = true
		}
	}
	return changed
}

// Clone returns a copy that an update function can change freely: its
// maps and step entries are its own. Step outputs, which are replaced and
// never changed in place, are shared (capped, so that an append to one
// copies it): a Clone then costs the number of entries, not the bytes of
// every output of a long workflow.
func (s State) Clone() State {
	c := State{
		Variables: cloneRaw(s.Variables),
		Extra:     cloneRaw(s.Extra),
	}
	if s.Steps != nil {
		c.Steps = make(map[string]*StepState, len(s.Steps))
		for k, v := range s.Steps {
			if v == nil {
				c.Steps[k] = nil
				continue
			}
			cp := *v
			cp.Output = slices.Clip(v.Output)
			cp.Extra = cloneRaw(v.Extra)
			c.Steps[k] = &cp
		}
	}
	return c
}

// MarshalJSON writes the document with "variables" and "steps" always present,
// keys sorted, raw values compact (encode.go).
func (s State) MarshalJSON() ([]byte, error) {
	return s.appendJSON(make([]byte, 0, s.sizeHint()), false)
}

// Encode is MarshalJSON that also marks, on each step, an output it found
// written as it is, so that encoding that step again, in s or in a Clone
// of s, copies the output without checking it again. It changes s's
// steps: call it on a state no other goroutine reads, such as a Clone a
// store is about to write.
func (s *State) Encode() ([]byte, error) { return s.appendJSON(make([]byte, 0, s.sizeHint()), true) }

// UnmarshalJSON accepts a JSON object; "variables" and "steps" must be objects
// (or null) when present. Raw values (variables, outputs, unknown keys) are
// kept in compact form: byte for byte what json.Marshal writes back. It reads
// b in one pass (decode.go) and can be called directly on bytes from a
// database: it validates them itself.
func (s *State) UnmarshalJSON(b []byte) error {
	st, err := decodeState(b)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// MarshalJSON writes status, attempts, and output/error when set, plus Extra.
func (st StepState) MarshalJSON() ([]byte, error) { return st.appendJSON(nil, false) }

// UnmarshalJSON accepts a step object. A missing status means PENDING.
func (st *StepState) UnmarshalJSON(b []byte) error {
	sc := &scanner{b: b}
	step, err := sc.step()
	if err == nil {
		err = sc.end()
	}
	if err != nil {
		if errors.Is(err, ErrInvalidState) {
			return err
		}
		return fmt.Errorf("%w: a step must be a JSON object: %w", ErrInvalidState, err)
	}
	*st = *step
	return nil
}

// ParseState decodes and validates a state document; empty input means {}.
func ParseState(b []byte) (State, error) {
	var s State
	if len(bytes.TrimSpace(b)) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, err
	}
	if err := s.Validate(); err != nil {
		return State{}, err
	}
	return s, nil
}

func cloneRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	c := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		c[k] = append(json.RawMessage(nil), v...)
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Equal reports whether st and o encode to the same step object: the same
// status, attempts, error, output bytes and extra members (two nil steps
// are equal). Raw values are compared as bytes, so the same value written
// differently counts as a change.
func (st *StepState) Equal(o *StepState) bool {
	if st == nil || o == nil {
		return st == o
	}
	if st.Status != o.Status || st.Attempts != o.Attempts || st.Error != o.Error ||
		(st.Output == nil) != (o.Output == nil) || !bytes.Equal(st.Output, o.Output) || len(st.Extra) != len(o.Extra) {
		return false
	}
	for k, v := range st.Extra {
		w, ok := o.Extra[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
