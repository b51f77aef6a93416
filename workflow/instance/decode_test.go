package instance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// legacyState is the state decoder before decode.go, on encoding/json: the
// reference the one-pass decoder is checked against. Raw values are
// compacted, as the one-pass decoder keeps them.
func legacyState(b []byte) (State, error) {
	var top map[string]json.RawMessage
	if err := legacyObject(b, &top); err != nil {
		return State{}, fmt.Errorf("%w: state must be a JSON object", ErrInvalidState)
	}
	var s State
	for k, v := range top {
		switch k {
		case "variables":
			if legacyNull(v) {
				continue
			}
			if err := legacyObject(v, &s.Variables); err != nil {
				return State{}, fmt.Errorf("%w: state.variables must be a JSON object", ErrInvalidState)
			}
			for name, raw := range s.Variables {
				s.Variables[name] = compactRaw(raw)
			}
		case "steps":
			if legacyNull(v) {
				continue
			}
			var raw map[string]json.RawMessage
			if err := legacyObject(v, &raw); err != nil {
				return State{}, fmt.Errorf("%w: state.steps must be a JSON object", ErrInvalidState)
			}
			s.Steps = make(map[string]*StepState, len(raw))
			for id, rv := range raw {
				st, err := legacyStep(rv)
				if err != nil {
					return State{}, fmt.Errorf("state.steps[%q]: %w", truncate(id), err)
				}
				s.Steps[id] = st
			}
		default:
			if s.Extra == nil {
				s.Extra = map[string]json.RawMessage{}
			}
			s.Extra[k] = compactRaw(v)
		}
	}
	return s, nil
}

func legacyStep(b []byte) (*StepState, error) {
	var m map[string]json.RawMessage
	if err := legacyObject(b, &m); err != nil {
		return nil, fmt.Errorf("%w: a step must be a JSON object", ErrInvalidState)
	}
	st := &StepState{Status: StepPending}
	for k, v := range m {
		var err error
		switch k {
		case "status":
			var s string
			if err = json.Unmarshal(v, &s); err == nil {
				st.Status = StepStatus(s)
			}
		case "attempts":
			err = json.Unmarshal(v, &st.Attempts)
		case "error":
			switch {
			case len(bytes.TrimSpace(v)) > 0 && bytes.TrimSpace(v)[0] == '{':
				if st.Extra == nil {
					st.Extra = map[string]json.RawMessage{}
				}
				st.Extra[k] = compactRaw(v)
			case !legacyNull(v):
				err = json.Unmarshal(v, &st.Error)
			}
		case "output":
			st.Output = compactRaw(v)
		default:
			if st.Extra == nil {
				st.Extra = map[string]json.RawMessage{}
			}
			st.Extra[k] = compactRaw(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: step field %q has the wrong type", ErrInvalidState, k)
		}
	}
	return st, nil
}

func legacyObject(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(b, v)
}

func legacyNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

func compactRaw(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// checkDecode compares the one-pass decoder with legacyState on b.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	got, err := decodeState(b)
	if !json.Valid(b) {
		if err == nil {
			t.Fatalf("decodeState accepted invalid JSON %q", b)
		}
		if !errors.Is(err, ErrInvalidState) {
			t.Fatalf("decodeState(%q) = %v, want an error wrapping ErrInvalidState", b, err)
		}
		return
	}
	want, wantErr := legacyState(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("decodeState(%q): error %v, encoding/json: %v", b, err, wantErr)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidState) {
			t.Fatalf("decodeState(%q) = %v, want an error wrapping ErrInvalidState", b, err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("decodeState(%q) differs from encoding/json (-want +got):\n%s", b, diff)
	}
	// And what it decodes, encodes to what encoding/json's decoding encodes to.
	wb, err1 := json.Marshal(want)
	gb, err2 := json.Marshal(got)
	if err1 != nil || err2 != nil || !bytes.Equal(wb, gb) {
		t.Fatalf("re-encoded: %s (%v) vs %s (%v)", wb, err1, gb, err2)
	}
}

var decodeCases = []string{
	`{}`, ` { } `, `{"variables":null,"steps":null}`, `null`, `[]`, `"x"`, `1`, ``, `{`, `{"a":1}x`, `{"a":1,}`,
	`{"variables":{"n":9007199254740993,"f":1.5e-7,"s":"a\"b\\u00e9\n","o":{"x":[1, 2 ,{ }]},"t":true,"z":null}}`,
	`{"steps":{"a":{"status":"RUNNING","attempts":2,"error":"boom","output":{"k": [1,2]},"custom":{"k":1}}}}`,
	`{"steps":{"a":{}}}`, `{"steps":{"a":{"status":null,"attempts":null,"error":null,"output":null}}}`,
	`{"steps":{"a":{"status":"FAILED","error":{"type":"timeout"}}}}`,
	`{"steps":{"a":{"attempts":1.0}}}`, `{"steps":{"a":{"attempts":1e2}}}`, `{"steps":{"a":{"attempts":-0}}}`,
	`{"steps":{"a":{"attempts":99999999999999999999}}}`, `{"steps":{"a":{"attempts":"1"}}}`,
	`{"steps":{"a":{"status":5}}}`, `{"steps":{"a":{"error":false}}}`, `{"steps":{"a":[]}}`, `{"steps":[]}`,
	`{"variables":[]}`, `{"variables":"x"}`, `{"steps":{"a":"x"}}`,
	`{"variables":5,"variables":{"a":1}}`, `{"variables":{"a":1},"variables":5}`,
	`{"steps":{"a":5,"a":{}}}`, `{"steps":{"a":{"status":5,"status":"DONE"}}}`,
	`{"steps":{"a":{"attempts":3,"attempts":null}}}`, `{"steps":{"a":{"error":"x","error":null}}}`,
	`{"a\u0062":1,"\ud800":2,"\u00e9":3}`, "{\"inv\xffalid\":\"\xfe\"}", `{"":{"":""}}`,
	`{"extra":{"deep":[[[[{"a":[]}]]]]},"meta":"m"}`, `{"x":-}`, `{"x":01}`, `{"x":1.}`, `{"x":.5}`, `{"x":1e}`,
	`{"x":"\x"}`, `{"x":"\u12"}`, "{\"x\":\"\t\"}", `{"x":tru}`, `{"x":nul}`, `{"x" 1}`, `{1:2}`,
	"{\"variables\":{\"a\":\n\t1\r\n}}",
}

func TestDecodeStateMatchesEncodingJSON(t *testing.T) {
	for _, c := range decodeCases {
		checkDecode(t, []byte(c))
	}
	// The limit counts every level of the document: the top object,
	// variables, steps and a step too. Each case is checked on both sides of
	// it.
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		format string
		levels int // of nesting around the array
	}{
		{`{"x":%s}`, 1},
		{`{"variables":{"v":%s}}`, 2},
		{`{"steps":{"a":{"output":%s}}}`, 3},
		{`{"steps":{"a":{"custom":%s}}}`, 3},
	} {
		for _, n := range []int{maxDepth - c.levels - 1, maxDepth - c.levels, maxDepth - c.levels + 1} {
			doc := []byte(fmt.Sprintf(c.format, nest(n)))
			if want := n+c.levels <= maxDepth; json.Valid(doc) != want {
				t.Fatalf("json.Valid at depth %d = %v", n+c.levels, !want)
			}
			checkDecode(t, doc)
		}
	}
}

// States nested deeper than encoding/json allows cannot be encoded, as
// before: json.Marshal refused them.
func TestEncodeStateDepth(t *testing.T) {
	nest := func(n int) json.RawMessage { return json.RawMessage(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	for _, n := range []int{maxDepth - 4, maxDepth - 3, maxDepth - 2, maxDepth - 1, maxDepth} {
		for _, s := range []State{
			{Extra: map[string]json.RawMessage{"x": nest(n)}},
			{Variables: map[string]json.RawMessage{"v": nest(n)}},
			{Steps: map[string]*StepState{"a": {Output: nest(n)}}},
			{Steps: map[string]*StepState{"a": {Extra: map[string]json.RawMessage{"c": nest(n)}}}},
		} {
			checkEncode(t, s)
		}
	}
}

// FuzzStateDecode: the one-pass decoder accepts exactly what encoding/json
// accepts (for a state document) and decodes it to the same State.
func FuzzStateDecode(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, b) })
}

// legacyMarshal is State.MarshalJSON before encode.go: a map for
// encoding/json, the reference the direct encoder is checked against.
func legacyMarshal(s State) ([]byte, error) {
	m := make(map[string]any, len(s.Extra)+2)
	for k, v := range s.Extra {
		m[k] = v
	}
	vars := s.Variables
	if vars == nil {
		vars = map[string]json.RawMessage{}
	}
	steps := map[string]any{}
	for id, st := range s.Steps {
		if st == nil {
			steps[id] = nil
			continue
		}
		sm := make(map[string]any, len(st.Extra)+4)
		for k, v := range st.Extra {
			sm[k] = v
		}
		sm["status"] = st.Status
		sm["attempts"] = st.Attempts
		if st.Output != nil {
			sm["output"] = st.Output
		}
		if st.Error != "" {
			sm["error"] = st.Error
		}
		steps[id] = sm
	}
	m["variables"] = vars
	m["steps"] = steps
	return json.Marshal(m)
}

// checkEncode compares State.MarshalJSON, and json.Marshal of the state,
// with legacyMarshal.
func checkEncode(t *testing.T, s State) {
	t.Helper()
	// The reference is what json.Marshal(state) wrote with the old
	// MarshalJSON: its output, validated as a whole (which also bounds the
	// nesting of the whole document).
	want, wantErr := legacyMarshal(s)
	if wantErr == nil && !json.Valid(want) {
		wantErr = errors.New("exceeded max depth")
	}
	got, err := s.MarshalJSON()
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("MarshalJSON error %v, encoding/json: %v", err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON:\n%s\nencoding/json:\n%s", got, want)
	}
	viaJSON, err := json.Marshal(s)
	if err != nil || !bytes.Equal(viaJSON, want) {
		t.Fatalf("json.Marshal(state) = %s, %v; want %s", viaJSON, err, want)
	}
	// Encode writes the same, and so does every encoding after it, of the
	// state and of its Clone, which copy the outputs it marked.
	marked := s.Clone()
	for i, enc := range []func() ([]byte, error){marked.Encode, marked.Encode, marked.MarshalJSON, marked.Clone().MarshalJSON} {
		if got, err := enc(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("encoding %d after Encode = %s, %v; want %s", i, got, err, want)
		}
	}
}

func TestEncodeStateMatchesEncodingJSON(t *testing.T) {
	for _, c := range decodeCases {
		if s, err := decodeState([]byte(c)); err == nil {
			checkEncode(t, s)
		}
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, s := range []State{
		{},
		{Variables: map[string]json.RawMessage{"nil": nil, "html": raw(`"<a href=\"x\">&amp;</a>"`), "ls": raw("\"\u2028\u2029\"")}},
		{Variables: map[string]json.RawMessage{"bad": raw(`{`)}},
		{Variables: map[string]json.RawMessage{"empty": raw(``)}},
		{Variables: map[string]json.RawMessage{"trailing": raw(`1 2`)}},
		{Variables: map[string]json.RawMessage{"spaced": raw(" { \"a\" : [ 1 , 2 ] } ")}},
		{Extra: map[string]json.RawMessage{"variables": raw(`1`), "steps": raw(`2`), "<k>": raw(`"v"`), "é\n": nil}},
		{Steps: map[string]*StepState{"nil": nil, "a": {Status: "RUNNING", Attempts: -3, Error: "a<b\x00\xff", Output: raw(`{"x":"&"}`),
			Extra: map[string]json.RawMessage{"status": raw(`"X"`), "error": raw(`1`), "z": raw(`true`)}}}},
		{Steps: map[string]*StepState{"a": {Output: raw(``)}}},
		{Steps: map[string]*StepState{"a": {Output: raw(`nope`)}}},
		{Steps: map[string]*StepState{"a": {Extra: map[string]json.RawMessage{"x": raw(`[1,]`)}}}},
		// Extra keys named like the fields: written when the field is not.
		{Steps: map[string]*StepState{"a": {Extra: map[string]json.RawMessage{"output": raw(`1`), "error": raw(`"e"`), "status": raw(`2`)}}}},
		{Steps: map[string]*StepState{"a": {Output: raw(`3`), Error: "x", Extra: map[string]json.RawMessage{"output": raw(`1`), "error": raw(`"e"`)}}}},
	} {
		checkEncode(t, s)
	}
}

// FuzzStateEncode: what the decoder accepts encodes to what encoding/json
// writes for it.
func FuzzStateEncode(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"variables":{"h":"<&>\u2028"},"steps":{"a":{"status":"<","error":"\u0000","output":"&"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeState(b)
		if err != nil {
			return
		}
		checkEncode(t, s)
	})
}
