package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/flowd/flowd/workflow"
)

// flowd def get writes every field of a definition, so that what it prints
// applies again as the same definition: on the server it came from it is
// unchanged, and on another server it is stored exactly as the first one
// stores it (compared through -o json).
func TestCLIDefGetRoundTrip(t *testing.T) {
	t.Parallel()
	b, other := setupCLI(t), setupCLI(t)
	defs := map[string]string{"every-field": "def-every-field", "every-field-code": "def-every-field-code"}
	var stored []json.RawMessage
	for name, file := range defs {
		if res := b.run("", nil, "def", "apply", "testdata/"+file+".yaml"); res.code != 0 {
			t.Fatalf("def apply %s: %+v", file, res)
		}
		text := b.golden("def-get-"+name, 0, "", "def", "get", name)
		if res := b.run(text.stdout, nil, "def", "apply", "-"); res.code != 0 || res.stdout != "definition "+name+" revision 1 (unchanged)\n" {
			t.Errorf("def get %s | def apply - on the same server: %+v", name, res)
		}
		want := definitionJSON(t, b, name)
		stored = append(stored, want)
		if res := other.run(text.stdout, nil, "def", "apply", "-"); res.code != 0 {
			t.Errorf("def get %s | def apply - on another server: %+v\ninput:\n%s", name, res, text.stdout)
			continue
		}
		if got := definitionJSON(t, other, name); !jsonEqual(want, got) {
			t.Errorf("%s applied from def get's text differs:\n got %s\nwant %s", name, got, want)
		}
	}
	// The fixtures set every field the format has: a field added to it
	// must be added to them too, so that the round trip covers it.
	seen := map[string]bool{}
	for _, raw := range stored {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		collectKeys(v, seen)
	}
	for _, f := range jsonFields(reflect.TypeFor[workflow.Definition](), map[reflect.Type]bool{}) {
		if !seen[f] {
			t.Errorf("no fixture sets %q: add it to testdata/def-every-field*.yaml", f)
		}
	}
}

// definitionJSON is the definition as flowd def get -o json prints it.
func definitionJSON(t *testing.T, b *cliBundle, name string) json.RawMessage {
	t.Helper()
	res := b.run("", nil, "def", "get", name, "-o", "json")
	var info struct{ Definition json.RawMessage }
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &info) != nil {
		t.Fatalf("def get %s -o json: %+v", name, res)
	}
	return info.Definition
}

func collectKeys(v any, seen map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			seen[k] = true
			collectKeys(x, seen)
		}
	case []any:
		for _, x := range v {
			collectKeys(x, seen)
		}
	}
}

// jsonFields lists the JSON names of the fields of t and of the structs of
// the workflow package it holds, at every depth.
func jsonFields(t reflect.Type, done map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || done[t] || t.PkgPath() != reflect.TypeFor[workflow.Definition]().PkgPath() {
		return nil
	}
	done[t] = true
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		names = append(names, jsonFields(f.Type, done)...)
	}
	return names
}

// flowd def list shows a Serverless Workflow document's tasks, at every
// depth, and its timeout.
func TestCLIDefListServerlessWorkflow(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	doc := `document: {dsl: '1.0.0', namespace: examples, name: greet, version: '1.0.0'}
timeout: {after: {minutes: 10}}
do:
  - sayHello:
      set: {greeting: '${ "Hello, " + .name }'}
  - guarded:
      try:
        - call-api:
            call: charge
      catch:
        do:
          - giveUp:
              raise: {error: {type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime, status: 500}}
`
	if res := b.run(doc, nil, "def", "apply", "-"); res.code != 0 {
		t.Fatalf("def apply: %+v", res)
	}
	b.golden("def-list-sw", 0, "", "def", "list")
}
