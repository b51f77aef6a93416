package main

// `flowd def get` writes a definition as YAML that `flowd def apply` takes
// back. It writes the JSON the server stores, key by key, rather than the
// fields this binary knows of: a field added to the definition format (or
// one a newer server has) is never dropped on the way through.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/sw"
)

// The order keys are written in, so that a definition reads top-down: what
// it is, how it runs, then its steps. Keys not listed follow in the order the
// server sent them; steps come last.
var (
	definitionKeyOrder = []string{"name", "timeout", "retention", "priority", "concurrency", "code", "retry", "search", "output"}
	stepKeyOrder       = []string{"id", "type", "handler", "definition", "event", "key", "duration", "depends_on", "join",
		"when", "foreach", "max_concurrency", "input", "request", "retry", "timeout", "concurrency", "rate_limit"}
	requestKeyOrder = []string{"method", "url", "headers", "body"}
)

// templateKeys hold template trees (any JSON): written as one line of JSON,
// which YAML reads as flow style, so that they read as the JSON they are.
var templateKeys = []string{"input", "body", "output"}

// printDefinition writes a revision as a comment naming it, then the
// definition: a flowd definition as block YAML, a Serverless Workflow
// document as its JSON (which YAML reads as it is).
func printDefinition(w io.Writer, info *api.DefinitionInfo) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s revision %d, stored %s\n", clean(info.Name), info.Revision, timestamp(info.CreatedAt))
	raw := bytes.TrimSpace(info.Definition)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		fmt.Fprintf(&b, "name: %s\n", yamlString(info.Name))
	case sw.IsDocument(raw):
		var doc bytes.Buffer
		if err := json.Indent(&doc, raw, "", "  "); err != nil {
			return err
		}
		b.WriteString(doc.String() + "\n")
	default:
		v, err := decodeOrdered(raw)
		if err != nil {
			return fmt.Errorf("definition %s revision %d: %w", info.Name, info.Revision, err)
		}
		def, ok := v.(*orderedObject)
		if !ok {
			return fmt.Errorf("definition %s revision %d is not a JSON object", info.Name, info.Revision)
		}
		// The revision is the store's, said in the comment; applying
		// the output makes a revision of its own.
		def.remove("revision")
		writeMapping(&b, def, 0, "", false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMapping writes the members of o as block YAML at indent; parent is
// the key o is under ("" at the top), which chooses the order of its keys.
// In a sequence item, the first member goes on the dash's line.
func writeMapping(b *strings.Builder, o *orderedObject, indent int, parent string, item bool) {
	pad := strings.Repeat(" ", indent)
	for i, k := range o.sorted(parent) {
		if i == 0 && item {
			writeMember(b, "", k, o.values[k], indent)
			continue
		}
		writeMember(b, pad, k, o.values[k], indent)
	}
}

func writeMember(b *strings.Builder, pad, key string, v any, indent int) {
	fmt.Fprintf(b, "%s%s:", pad, yamlString(key))
	if slices.Contains(templateKeys, key) {
		b.WriteString(" " + jsonText(v) + "\n")
		return
	}
	if s, ok := flow(v); ok {
		b.WriteString(" " + s + "\n")
		return
	}
	b.WriteString("\n")
	switch v := v.(type) {
	case *orderedObject:
		writeMapping(b, v, indent+2, key, false)
	case []any:
		for _, item := range v {
			fmt.Fprintf(b, "%s  - ", strings.Repeat(" ", indent))
			if o, ok := item.(*orderedObject); ok && len(o.keys) > 0 {
				writeMapping(b, o, indent+4, key, true)
				continue
			}
			s, _ := flow(item)
			if s == "" {
				s = jsonText(item)
			}
			b.WriteString(s + "\n")
		}
	}
}

// flow writes v on one line when it is a scalar, or an object or array of
// scalars (a retry policy, headers, depends_on); ok is false for the rest.
func flow(v any) (string, bool) {
	switch v := v.(type) {
	case *orderedObject:
		parts := make([]string, 0, len(v.keys))
		for _, k := range v.keys {
			s, ok := scalar(v.values[k])
			if !ok {
				return "", false
			}
			parts = append(parts, yamlString(k)+": "+s)
		}
		return "{" + strings.Join(parts, ", ") + "}", true
	case []any:
		parts := make([]string, 0, len(v))
		for _, item := range v {
			s, ok := scalar(item)
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ", ") + "]", true
	}
	return scalar(v)
}

func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "null", true
	case bool:
		return fmt.Sprint(v), true
	case json.Number:
		return v.String(), true
	case string:
		return yamlString(v), true
	}
	return "", false
}

// durationYAML matches Go durations ("30s", "1h30m", "1.5s"), which YAML
// reads back as strings: no YAML number or timestamp looks like one.
var durationYAML = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`)

// plainYAML matches the other strings that YAML reads back as the same
// string without quotes; everything else is written as a JSON string.
var plainYAML = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// yamlString writes s as a YAML scalar that reads back as the string s.
func yamlString(s string) string {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf":
		return jsonText(s)
	}
	if plainYAML.MatchString(s) || durationYAML.MatchString(s) {
		return s
	}
	return jsonText(s)
}

// jsonText is v as compact JSON without HTML escaping, made safe for a
// terminal (an escaped control character is still valid JSON and YAML).
func jsonText(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "?"
	}
	return clean(strings.TrimSuffix(buf.String(), "\n"))
}

// orderedObject is a JSON object that remembers the order of its keys.
type orderedObject struct {
	keys   []string
	values map[string]any
}

func (o *orderedObject) remove(key string) {
	if _, ok := o.values[key]; ok {
		delete(o.values, key)
		o.keys = slices.DeleteFunc(o.keys, func(k string) bool { return k == key })
	}
}

// sorted is o's keys in the order they are written under parent.
func (o *orderedObject) sorted(parent string) []string {
	var order []string
	switch parent {
	case "":
		order = definitionKeyOrder
	case "steps":
		order = stepKeyOrder
	case "request":
		order = requestKeyOrder
	}
	rank := func(k string) int {
		if k == "steps" && parent == "" {
			return len(order) + 1
		}
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		return len(order)
	}
	keys := slices.Clone(o.keys)
	slices.SortStableFunc(keys, func(a, b string) int { return rank(a) - rank(b) })
	return keys
}

// decodeOrdered decodes one JSON value, its objects as *orderedObject and
// its numbers as json.Number (their text).
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &orderedObject{values: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.values[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.values[k] = v
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}

// MarshalJSON writes o with its keys in their order.
func (o *orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, err := marshalNoEscape(k)
		if err != nil {
			return nil, err
		}
		vj, err := marshalNoEscape(o.values[k])
		if err != nil {
			return nil, err
		}
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
