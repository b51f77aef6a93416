// Reading a document: YAML or JSON into JSON values whose numbers keep the
// text they were written with.

package sw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"go.yaml.in/yaml/v2"
)

// documentJSON returns data as JSON: unchanged if it already is JSON, else
// converted from YAML with the scalars of YAML 1.2 (only true/false are
// booleans) and numbers kept as written, so large integers stay exact.
func documentJSON(data []byte) ([]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("the document is empty")
	}
	if json.Valid(trimmed) {
		return trimmed, nil
	}
	if line := secondDocument(data); line > 0 {
		// The converter would silently read the first document only.
		return nil, fmt.Errorf("syntax: line %d: a second YAML document starts here; a workflow is one document", line)
	}
	var root *yamlValue
	if err := yaml.UnmarshalStrict(data, &root); err != nil {
		return nil, fmt.Errorf("syntax: %w", err)
	}
	if root == nil {
		return []byte("null"), nil
	}
	return root.json, nil
}

// decodeJSON decodes raw into JSON values with json.Number numbers; empty is
// null.
func decodeJSON(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// encodeJSON is json.Marshal without HTML escaping, so "&" in a URL stays
// readable.
func encodeJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// yamlValue is one YAML node converted to JSON.
type yamlValue struct{ json []byte }

func (v *yamlValue) UnmarshalYAML(unmarshal func(any) error) error {
	// Probe the node's kind with targets that fail fast without decoding
	// children: a TypeError here always means "not this kind".
	var raw string
	if unmarshal(&raw) == nil {
		var x any
		if err := unmarshal(&x); err != nil {
			return plainYAMLError(err)
		}
		j, err := yamlScalarJSON(x, raw)
		if err != nil {
			return err
		}
		v.json = j
		return nil
	}
	var seq []*yamlValue
	err := unmarshal(&seq)
	if err == nil {
		b := []byte{'['}
		for i, e := range seq {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, e.jsonOrNull()...)
		}
		v.json = append(b, ']')
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var m map[string]*yamlValue
	if err := unmarshal(&m); err != nil {
		return plainYAMLError(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, encodeString(k)...)
		b = append(b, ':')
		b = append(b, m[k].jsonOrNull()...)
	}
	v.json = append(b, '}')
	return nil
}

func (v *yamlValue) jsonOrNull() []byte {
	if v == nil {
		return []byte("null")
	}
	return v.json
}

// plainYAMLError turns a *yaml.TypeError into a plain error, so that the
// parent node does not take it for a failed probe.
func plainYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return err
}

// yamlScalarJSON converts a scalar: x is what YAML 1.1 resolved it to, raw
// the text it was written with.
func yamlScalarJSON(x any, raw string) ([]byte, error) {
	switch x := x.(type) {
	case nil:
		return []byte("null"), nil
	case string:
		return encodeString(x), nil
	case bool:
		switch raw {
		case "true", "True", "TRUE":
			return []byte("true"), nil
		case "false", "False", "FALSE":
			return []byte("false"), nil
		}
		return encodeString(raw), nil
	case int, int64, uint64, float64:
		if f, ok := x.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("%q has no JSON form", raw)
		}
		if raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Valid([]byte(raw)) {
			return []byte(raw), nil
		}
		return json.Marshal(x)
	}
	return encodeString(raw), nil
}

func encodeString(s string) []byte {
	b, _ := encodeJSON(s) // a string always encodes
	return b
}

// secondDocument returns the line number of a "---" document marker that
// follows content, or 0. A marker is "---" at the start of a line, alone or
// followed by a space; inside a block scalar such a line would be indented.
func secondDocument(data []byte) int {
	content := false
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			if content {
				return n + 1
			}
			rest := strings.TrimSpace(strings.TrimPrefix(line, "---"))
			content = rest != "" && !strings.HasPrefix(rest, "#")
			continue
		}
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(line, "%") {
			content = true
		}
	}
	return 0
}
