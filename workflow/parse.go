// Reading a definition: YAML or JSON into a Definition, with every decoding
// problem listed by its path, and the canonical JSON a revision is stored as.

package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"
)

// ParseDefinition decodes a YAML or JSON definition and validates it. Unknown
// fields are errors. Every problem found is reported in one *DefinitionError
// (errors.Is(err, ErrInvalidDefinition)); a definition that decodes but is
// invalid is not returned.
//
// A document that is valid JSON is decoded as JSON directly; anything else is
// converted from YAML (see yamlToJSON: duplicate keys are errors, scalars follow
// YAML 1.2, numbers keep their text).
func ParseDefinition(data []byte) (*Definition, error) {
	return ParseDefinitionAs(data, "")
}

// ParseDefinitionAs is ParseDefinition for a definition stored under name
// (any name when it is empty): a definition that names itself otherwise is
// invalid, and that problem is listed with all the others.
func ParseDefinitionAs(data []byte, name string) (*Definition, error) {
	doc, err := definitionJSON(data)
	if err != nil {
		return nil, &DefinitionError{Problems: []string{err.Error()}}
	}
	var d Definition
	ps := &problemList{}
	if b := bytes.TrimSpace(doc); len(b) == 0 || b[0] != '{' {
		ps.block("", "a definition must be an object (a mapping with name and steps), not "+describeJSON(doc))
		return nil, ps.err(&d)
	}
	present := map[string]bool{}
	ps.decode(doc, reflect.ValueOf(&d).Elem(), "", present)
	d.checkExplicitRetryZeros(ps, present)
	d.validate(ps)
	if name != "" && d.Name != "" && d.Name != name {
		ps.add("name", fmt.Sprintf("the definition is named %q but was PUT to /v1/definitions/%s", d.Name, name))
	}
	if err := ps.err(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// definitionJSON returns data as JSON: unchanged if it already is JSON, else
// converted from YAML.
func definitionJSON(data []byte) ([]byte, error) { return DocumentJSON(data, "definition") }

// DocumentJSON returns data, one YAML or JSON document (a what: its errors
// name it), as JSON: unchanged if it already is JSON, else converted from
// YAML (yamlToJSON: numbers keep their text, YAML 1.2 scalars).
func DocumentJSON(data []byte, what string) ([]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("the %s is empty", what)
	}
	if json.Valid(trimmed) {
		return trimmed, nil
	}
	if line := secondDocument(data); line > 0 {
		// The converter would silently read the first document only.
		return nil, fmt.Errorf("syntax: line %d: a second YAML document starts here; a %s is one document", line, what)
	}
	if err := CheckYAMLExpansion(data, MaxExpandedDocumentBytes); err != nil {
		return nil, err
	}
	j, err := yamlToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("syntax: %s", err.Error())
	}
	return j, nil
}

// yamlToJSON converts one YAML document to JSON, like sigs.k8s.io/yaml's
// YAMLToJSONStrict (duplicate keys are errors, object keys come out sorted) but
// with the scalars of YAML 1.2 rather than 1.1: only true/false (any case
// style) are booleans, so `country: NO` stays a string and a key `y:` stays "y"
// instead of becoming "true"; and a number keeps the text it was written with
// when that is valid JSON (9007199254740993 and 1.50 pass through exactly).
func yamlToJSON(data []byte) ([]byte, error) {
	var root *yamlValue
	if err := yaml.UnmarshalStrict(data, &root); err != nil {
		return nil, err
	}
	if root == nil {
		return []byte("null"), nil
	}
	return root.json, nil
}

// yamlValue is one YAML node converted to JSON. A null node never reaches
// UnmarshalYAML: the decoder leaves the pointer to it nil.
type yamlValue struct{ json []byte }

func (v *yamlValue) UnmarshalYAML(unmarshal func(any) error) error {
	// Probe the node's kind with targets that fail fast without decoding any
	// children. A child's own failure comes back as a plain error, never a
	// *yaml.TypeError, so a TypeError here always means "not this kind".
	var raw string
	if unmarshal(&raw) == nil { // a scalar; raw is its text as written
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
	// Keys decode into string as their text as written, so `y:` stays "y".
	var m map[string]*yamlValue
	if err := unmarshal(&m); err != nil {
		return plainYAMLError(err)
	}
	b := []byte{'{'}
	for i, k := range sortedKeys(m) {
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

// yamlScalarJSON converts a scalar: x is what YAML 1.1 resolved it to, raw the
// text it was written with.
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
		return encodeString(raw), nil // yes, no, on, off, y, n: strings in YAML 1.2
	case int, int64, uint64, float64:
		if f, ok := x.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("%q has no JSON form", truncate(raw))
		}
		if raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Valid([]byte(raw)) {
			return []byte(raw), nil
		}
		return json.Marshal(x) // 0x1F, +1, .5, 1_000
	}
	return encodeString(raw), nil // anything else (a timestamp, …) as the text written
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

// Canonical returns stable JSON for d, for storing it and for telling whether a
// definition is the same as the latest revision: Revision is left out, object
// keys inside input and body are sorted, numbers keep their exact text, an empty
// retry block is dropped, and durations are written in their shortest form. The
// same definition gives the same bytes whether it was written in YAML or JSON.
func (d *Definition) Canonical() ([]byte, error) {
	c := *d
	c.Revision = 0
	c.Steps = make([]Step, len(d.Steps))
	if c.Retry != nil && *c.Retry == (RetryPolicy{}) {
		c.Retry = nil
	}
	for i, s := range d.Steps {
		var err error
		if s.Input, err = canonicalJSON(s.Input); err != nil {
			return nil, fmt.Errorf("steps[%d].input: %w", i, err)
		}
		if s.Retry != nil && *s.Retry == (RetryPolicy{}) {
			s.Retry = nil
		}
		if s.Request != nil {
			r := *s.Request
			if r.Body, err = canonicalJSON(r.Body); err != nil {
				return nil, fmt.Errorf("steps[%d].request.body: %w", i, err)
			}
			if len(r.Headers) == 0 {
				r.Headers = nil
			}
			s.Request = &r
		}
		if len(s.DependsOn) == 0 {
			s.DependsOn = nil
		}
		c.Steps[i] = s
	}
	return marshalNoEscape(c)
}

// canonicalJSON re-encodes raw with sorted object keys and exact numbers; JSON
// null and empty input become nil.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
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
	return marshalNoEscape(v)
}

// marshalNoEscape is json.Marshal without HTML escaping, so "&" in a URL stays
// readable in stored definitions.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decode decodes raw into v field by field, so that one bad field does not hide
// the others: every unknown or duplicate key and every value of the wrong type
// is recorded with its path. Keys must match the json tags exactly (encoding/json
// would also accept "Name" for "name"). present receives the path of every key
// found. JSON null leaves the zero value, like an absent key.
func (p *problemList) decode(raw json.RawMessage, v reflect.Value, path string, present map[string]bool) {
	if isNull(raw) {
		return
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			p.block(path, decodeProblem(err, v.Type(), raw))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		p.decode(raw, nv.Elem(), path, present)
		v.Set(nv)
	case reflect.Struct:
		members, err := objectMembers(raw)
		if err != nil {
			p.block(path, "must be an object, not "+describeJSON(raw))
			return
		}
		fields, names := jsonFields(v.Type())
		seen := make(map[string]bool, len(members))
		for _, m := range members {
			if seen[m.key] {
				p.note(path, fmt.Sprintf("duplicate field %q", truncate(m.key)))
				continue
			}
			seen[m.key] = true
			i, ok := fields[m.key]
			if !ok {
				p.note(path, unknownField(m.key, names))
				continue
			}
			fp := joinPath(path, m.key)
			present[fp] = true
			p.decode(m.value, v.Field(i), fp, present)
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			p.block(path, "must be a list, not "+describeJSON(raw))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, e := range elems {
			p.decode(e, s.Index(i), path+"["+strconv.Itoa(i)+"]", present)
		}
		v.Set(s)
	case reflect.Map:
		members, err := objectMembers(raw)
		if err != nil {
			p.block(path, "must be an object, not "+describeJSON(raw))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(members))
		for _, mem := range members {
			key := reflect.ValueOf(mem.key).Convert(v.Type().Key())
			if m.MapIndex(key).IsValid() {
				p.note(path, fmt.Sprintf("duplicate key %q", truncate(mem.key)))
				continue
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			p.decode(mem.value, ev, path+keyPath(mem.key), present)
			m.SetMapIndex(key, ev)
		}
		v.Set(m)
	default:
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			p.block(path, decodeProblem(err, v.Type(), raw))
		}
	}
}

func decodeProblem(err error, t reflect.Type, raw json.RawMessage) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "must be " + describeType(t) + ", not " + describeJSON(raw)
	}
	return err.Error()
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// describeJSON names what a JSON value is, for error messages: numbers and
// booleans are shown (YAML turns an unquoted yes into true), the rest by kind.
func describeJSON(raw []byte) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 'n':
		return "null"
	}
	return truncate(string(b))
}

// jsonFields maps the json names of t's fields to their index.
func jsonFields(t reflect.Type) (map[string]int, []string) {
	fields := make(map[string]int, t.NumField())
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = i
		names = append(names, name)
	}
	return fields, names
}

func unknownField(key string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", truncate(key), best)
	}
	return fmt.Sprintf("unknown field %q (known: %s)", truncate(key), strings.Join(names, ", "))
}

// editDistance is the Levenshtein distance, for "did you mean" hints.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

type member struct {
	key   string
	value json.RawMessage
}

// objectMembers returns the members of a JSON object in document order,
// duplicates included.
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}
