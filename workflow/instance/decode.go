package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The state decoder. A state is read on every Get and every write, so it
// is decoded in one pass over the bytes: the scanner validates the JSON,
// picks out variables, steps and the step fields, and copies every other
// value in compact form (no insignificant whitespace, as json.Marshal would
// write it). encoding/json needed about four passes for the same result
// (validate, decode the top level into raw values, decode variables and
// each step again), the largest client cost of an update (docs/BENCHMARKS.md).
// FuzzStateDecode checks it against encoding/json.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

var (
	errSyntax = errors.New("invalid JSON")
	errDepth  = errors.New("exceeded max depth")
)

// scanner reads one JSON document from b.
type scanner struct {
	b     []byte
	i     int
	depth int
	// html makes value escape <, >, & and U+2028/U+2029 in strings, as
	// encoding/json does when it writes a json.RawMessage.
	html bool
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// expect consumes c (after whitespace).
func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return errSyntax
	}
	s.i++
	return nil
}

// stringEnd validates the string starting at s.i (a '"') and returns the
// index after its closing quote, and whether it has escapes.
func (s *scanner) stringEnd() (end int, escaped bool, err error) {
	i := s.i + 1
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(s.b) {
				return 0, false, errSyntax
			}
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s.b) {
					return 0, false, errSyntax
				}
				for _, h := range s.b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, errSyntax
					}
				}
				i += 6
			default:
				return 0, false, errSyntax
			}
		case c < 0x20:
			return 0, false, errSyntax
		default:
			i++
		}
	}
	return 0, false, errSyntax
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// str reads a string and returns its value, as encoding/json decodes it
// (escapes resolved, invalid UTF-8 replaced).
func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", errSyntax
	}
	end, escaped, err := s.stringEnd()
	if err != nil {
		return "", err
	}
	raw := s.b[s.i:end]
	s.i = end
	if inner := raw[1 : len(raw)-1]; !escaped && utf8.Valid(inner) {
		return string(inner), nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", errSyntax
	}
	return v, nil
}

// value validates the value at s.i and appends it to dst without
// insignificant whitespace.
func (s *scanner) value(dst []byte) ([]byte, error) {
	switch c := s.peek(); {
	case c == '"':
		end, _, err := s.stringEnd()
		if err != nil {
			return nil, err
		}
		if s.html {
			dst = appendHTMLEscaped(dst, s.b[s.i:end])
		} else {
			dst = append(dst, s.b[s.i:end]...)
		}
		s.i = end
		return dst, nil
	case c == '{' || c == '[':
		if s.depth++; s.depth > maxDepth {
			return nil, errDepth
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.i++
		dst = append(dst, c)
		if s.peek() == closing {
			s.i++
			s.depth--
			return append(dst, closing), nil
		}
		for {
			var err error
			if c == '{' {
				if s.peek() != '"' {
					return nil, errSyntax
				}
				if dst, err = s.value(dst); err != nil {
					return nil, err
				}
				if err := s.expect(':'); err != nil {
					return nil, err
				}
				dst = append(dst, ':')
			}
			if dst, err = s.value(dst); err != nil {
				return nil, err
			}
			switch s.peek() {
			case ',':
				s.i++
				dst = append(dst, ',')
			case closing:
				s.i++
				s.depth--
				return append(dst, closing), nil
			default:
				return nil, errSyntax
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		end := s.numberEnd()
		if end < 0 {
			return nil, errSyntax
		}
		dst = append(dst, s.b[s.i:end]...)
		s.i = end
		return dst, nil
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return append(dst, lit...), nil
			}
		}
		return nil, errSyntax
	}
}

// numberEnd returns the index after the number at s.i, or -1.
func (s *scanner) numberEnd() int {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return -1
		}
	}
	return i
}

// raw returns the value at s.i in compact form, in a slice of its own.
func (s *scanner) raw() (json.RawMessage, error) { return s.value(nil) }

// isNullNext reports whether the next value is null, and consumes it if so.
func (s *scanner) isNullNext() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// object calls field for each key of the object at s.i; field must consume
// the key's value, also when it returns an error. A syntax error ends the
// object at once. An ErrInvalidState error (a value of the wrong shape) is
// held: as with encoding/json decoding into a map, a later duplicate of the
// key replaces the value, and with it the error.
func (s *scanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	// The objects read here count towards the nesting limit like any other:
	// the document's top level, variables, steps and each step.
	if s.depth++; s.depth > maxDepth {
		return errDepth
	}
	var (
		order []string // keys whose value was of the wrong shape, first seen first
		held  map[string]error
	)
	for n := 0; s.peek() != '}'; n++ {
		if n > 0 {
			if err := s.expect(','); err != nil {
				return err
			}
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		switch err := field(key); {
		case errors.Is(err, ErrInvalidState):
			if held == nil {
				held = map[string]error{}
			}
			if _, ok := held[key]; !ok {
				order = append(order, key)
			}
			held[key] = err
		case err != nil:
			return err
		case held != nil:
			delete(held, key)
		}
	}
	s.i++
	s.depth--
	for _, key := range order {
		if err, ok := held[key]; ok {
			return err
		}
	}
	return nil
}

// rawInto reads the value at s.i into (*m)[key], making the map if needed.
func (s *scanner) rawInto(m *map[string]json.RawMessage, key string) error {
	v, err := s.raw()
	if err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]json.RawMessage{}
	}
	(*m)[key] = v
	return nil
}

// mismatch consumes the value at s.i, of the wrong shape, and returns
// shapeErr, or the syntax error if the value is not even valid.
func (s *scanner) mismatch(shapeErr error) error {
	if _, err := s.value(nil); err != nil {
		return err
	}
	return shapeErr
}

// nullableString reads a string or null ("" for null) into *dst; other
// values are the error shapeErr returns.
func (s *scanner) nullableString(dst *string, shapeErr func() error) error {
	switch s.peek() {
	case 'n':
		if !s.isNullNext() {
			return errSyntax
		}
		*dst = "" // the last value wins; encoding/json leaves a string empty at null
		return nil
	case '"':
		v, err := s.str()
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}
	return s.mismatch(shapeErr())
}

// end fails unless only whitespace is left.
func (s *scanner) end() error {
	if s.peek() != 0 || s.i != len(s.b) {
		return errSyntax
	}
	return nil
}

// decodeState decodes a state document as State.UnmarshalJSON specifies.
func decodeState(b []byte) (State, error) {
	s := &scanner{b: b}
	var st State
	if s.peek() != '{' {
		return State{}, fmt.Errorf("%w: state must be a JSON object", ErrInvalidState)
	}
	err := s.object(func(key string) error {
		switch key {
		case "variables":
			if s.isNullNext() {
				st.Variables = nil
				return nil
			}
			if s.peek() != '{' {
				return s.mismatch(fmt.Errorf("%w: state.variables must be a JSON object", ErrInvalidState))
			}
			vars := map[string]json.RawMessage{}
			if err := s.object(func(name string) error { return s.rawInto(&vars, name) }); err != nil {
				return err
			}
			st.Variables = vars
		case "steps":
			if s.isNullNext() {
				st.Steps = nil
				return nil
			}
			if s.peek() != '{' {
				return s.mismatch(fmt.Errorf("%w: state.steps must be a JSON object", ErrInvalidState))
			}
			steps := map[string]*StepState{}
			if err := s.object(func(id string) error {
				step, err := s.step()
				if err != nil {
					return fmt.Errorf("state.steps[%q]: %w", truncate(id), err)
				}
				steps[id] = step
				return nil
			}); err != nil {
				return err
			}
			st.Steps = steps
		default:
			return s.rawInto(&st.Extra, key)
		}
		return nil
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		if errors.Is(err, ErrInvalidState) {
			return State{}, err
		}
		return State{}, fmt.Errorf("%w: state must be a JSON object: %w", ErrInvalidState, err)
	}
	return st, nil
}

// step decodes one entry of state.steps.
func (s *scanner) step() (*StepState, error) {
	if s.peek() != '{' {
		return nil, s.mismatch(fmt.Errorf("%w: a step must be a JSON object", ErrInvalidState))
	}
	st := &StepState{Status: StepPending}
	err := s.object(func(key string) error {
		wrongType := func() error {
			return fmt.Errorf("%w: step field %q has the wrong type", ErrInvalidState, key)
		}
		switch key {
		case "status":
			var v string
			if err := s.nullableString(&v, wrongType); err != nil {
				return err
			}
			st.Status = StepStatus(v)
		case "attempts":
			if s.isNullNext() {
				st.Attempts = 0 // the last value wins, and null decodes to nothing
				return nil
			}
			start := s.peek()
			v, err := s.value(nil)
			if err != nil {
				return err
			}
			if start != '-' && (start < '0' || start > '9') {
				return wrongType() // the value was consumed above
			}
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return wrongType()
			}
			st.Attempts = n
		case "error":
			if s.peek() == '{' {
				// An error object (a code workflow's timeout): kept as
				// it is, as any other member.
				st.Error = ""
				return s.rawInto(&st.Extra, key)
			}
			delete(st.Extra, key)
			return s.nullableString(&st.Error, wrongType)
		case "output":
			v, err := s.raw()
			if err != nil {
				return err
			}
			st.Output = v
		default:
			return s.rawInto(&st.Extra, key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
