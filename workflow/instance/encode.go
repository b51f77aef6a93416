package instance

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// The state encoder: the bytes json.Marshal wrote from the map the old
// MarshalJSON built (keys sorted, raw values validated and compacted, HTML
// characters escaped), written directly, without the map, reflection or a
// second pass. FuzzStateEncode checks it against encoding/json.

// appendJSON appends the state document to dst; mark says to mark the
// steps' outputs found written as they are (State.Encode).
func (s State) appendJSON(dst []byte, mark bool) ([]byte, error) {
	keys := make([]string, 0, len(s.Extra)+2)
	for k := range s.Extra {
		if k != "variables" && k != "steps" {
			keys = append(keys, k)
		}
	}
	keys = append(keys, "steps", "variables")
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		dst = appendKey(dst, i, k)
		switch k {
		case "variables":
			dst, err = appendRawMap(dst, s.Variables, 2)
		case "steps":
			dst, err = appendSteps(dst, s.Steps, mark)
		default:
			dst, err = appendRaw(dst, s.Extra[k], 1)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendSteps(dst []byte, steps map[string]*StepState, mark bool) ([]byte, error) {
	dst = append(dst, '{')
	var err error
	for i, id := range sortedKeys(steps) {
		dst = appendKey(dst, i, id)
		if st := steps[id]; st == nil {
			dst = append(dst, "null"...)
		} else if dst, err = st.appendJSON(dst, mark); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSON appends the step object to dst. Extra keys named like the
// fields are written only when the field is not (as the map the old encoder
// built let the fields overwrite them). mark says to mark the output when
// it is written as it is.
func (st *StepState) appendJSON(dst []byte, mark bool) ([]byte, error) {
	const depth = 3 // the step object inside state.steps
	keys := make([]string, 0, len(st.Extra)+4)
	for k := range st.Extra {
		switch {
		case k == "status", k == "attempts", k == "output" && st.Output != nil, k == "error" && st.Error != "":
		default:
			keys = append(keys, k)
		}
	}
	keys = append(keys, "status", "attempts")
	if st.Output != nil {
		keys = append(keys, "output")
	}
	if st.Error != "" {
		keys = append(keys, "error")
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		dst = appendKey(dst, i, k)
		switch {
		case k == "status":
			dst = appendString(dst, string(st.Status))
		case k == "attempts":
			dst = strconv.AppendInt(dst, int64(st.Attempts), 10)
		case k == "output" && st.Output != nil:
			dst, err = st.appendOutput(dst, depth, mark)
		case k == "error" && st.Error != "":
			dst = appendString(dst, st.Error)
		default:
			dst, err = appendRaw(dst, st.Extra[k], depth)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendOutput appends the step's output: a copy when it is marked as
// written as it is, else checked and compacted by appendRaw. With mark,
// the output is then replaced by what was written (the same value, as it
// is stored) and marked.
func (st *StepState) appendOutput(dst []byte, depth int, mark bool) ([]byte, error) {
	if st.outputWritten() {
		return append(dst, st.Output...), nil
	}
	start := len(dst)
	dst, err := appendRaw(dst, st.Output, depth)
	if err != nil || !mark {
		return dst, err
	}
	if !bytes.Equal(dst[start:], st.Output) {
		st.Output = append(json.RawMessage(nil), dst[start:]...)
	}
	st.written = st.Output
	return dst, nil
}

// outputWritten reports whether the output is the one the encoder marked
// as written as it is: the same slice, not merely the same bytes.
func (st *StepState) outputWritten() bool {
	return len(st.Output) > 0 && len(st.written) == len(st.Output) && &st.written[0] == &st.Output[0]
}

// appendRawMap appends an object of raw values; depth is the object's own.
func appendRawMap(dst []byte, m map[string]json.RawMessage, depth int) ([]byte, error) {
	dst = append(dst, '{')
	var err error
	for i, k := range sortedKeys(m) {
		dst = appendKey(dst, i, k)
		if dst, err = appendRaw(dst, m[k], depth); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendKey appends the i-th key of an object, with its separators.
func appendKey(dst []byte, i int, key string) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	dst = appendString(dst, key)
	return append(dst, ':')
}

// appendRaw appends a raw value as json.Marshal writes a json.RawMessage:
// null for nil, else validated and compacted, HTML characters escaped.
//
// depth is the nesting the value sits at in the document (1 inside the top
// object): the whole document must stay within encoding/json's limit.
func appendRaw(dst []byte, raw json.RawMessage, depth int) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	s := &scanner{b: raw, html: true, depth: depth}
	out, err := s.value(dst)
	if err == nil {
		err = s.end()
	}
	if err != nil {
		// encoding/json's own message says what is wrong where.
		_, jerr := json.Marshal(raw)
		if jerr == nil {
			jerr = err
		}
		return nil, jerr
	}
	return out, nil
}

// appendString appends s as a JSON string, as encoding/json writes it.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendHTMLEscaped appends a valid JSON string token with <, >, & and
// U+2028/U+2029 escaped, as encoding/json's compact does with escapeHTML.
func appendHTMLEscaped(dst, tok []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c == '<' || c == '>' || c == '&' {
			dst = append(dst, tok[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			start = i + 1
		}
		// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
		if c == 0xE2 && i+2 < len(tok) && tok[i+1] == 0x80 && tok[i+2]&^1 == 0xA8 {
			dst = append(dst, tok[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[tok[i+2]&0xF])
			start = i + 3
			i += 2
		}
	}
	return append(dst, tok[start:]...)
}
