package main

import (
	"strings"
	"testing"
)

// greetDocument is a Serverless Workflow document: its name is under
// document, not at the top.
const greetDocument = `document:
  dsl: '1.0.0'
  namespace: examples
  name: greet
  version: '1.0.0'
do:
  - sayHello:
      set:
        greeting: ${ "Hello, " + .name }
`

// def apply finds the name of a Serverless Workflow document under
// document.name, in YAML and JSON; anything whose document.dsl is not a 1.0
// string is read as a flowd definition.
func TestDefinitionNameOfServerlessWorkflow(t *testing.T) {
	for _, tc := range []struct{ what, data, want, err string }{
		{"yaml", greetDocument, "greet", ""},
		{"json", `{"document":{"dsl":"1.0.3","namespace":"n","name":"from-json","version":"1"},"do":[]}`, "from-json", ""},
		{"flowd definition", "name: order\nsteps: [{id: a, type: task, handler: echo}]\n", "order", ""},
		{"no document.name", "document: {dsl: '1.0.0', namespace: n, version: '1'}\ndo: []\n", "",
			"the Serverless Workflow document in stdin is invalid (1 problem):\n  /document/name: is required"},
		{"blank document.name", "document: {dsl: '1.0.0', name: ' '}\ndo: []\n", "", "/document/name: is required"},
		// Another DSL version is no Serverless Workflow 1.0 document: the
		// flowd parser judges it, and says what it lacks.
		{"dsl 0.8", "document: {dsl: '0.8', name: old}\ndo: []\n", "", "name: is required"},
		{"dsl not a string", "document: {dsl: 1.0, name: num}\ndo: []\n", "", "name: is required"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			name, err := definitionName([]byte(tc.data), "stdin")
			switch {
			case tc.err == "" && (err != nil || name != tc.want):
				t.Errorf("name %q, error %v; want %q", name, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("name %q, error %v; want an error containing %q", name, err, tc.err)
			}
		})
	}
}

// flowd def apply stores a Serverless Workflow document under its
// document.name, and the same document again changes nothing. (This needs a
// server that takes Serverless Workflow documents.)
func TestCLIDefApplyServerlessWorkflow(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	if res := b.run(greetDocument, nil, "def", "apply", "-"); res.code != 0 || res.stdout != "definition greet revision 1 (created)\n" {
		t.Fatalf("def apply: %+v", res)
	}
	if res := b.run(greetDocument, nil, "def", "apply", "-"); res.code != 0 || res.stdout != "definition greet revision 1 (unchanged)\n" {
		t.Errorf("def apply again: %+v", res)
	}
	// A document the server rejects: every problem, one a line, exit 1.
	bad := greetDocument[:strings.Index(greetDocument, "set:")] + "call: grpc\n      with: {}\n"
	if res := b.run(bad, nil, "def", "apply", "-"); res.code != 1 || !strings.Contains(res.stderr, `definition "greet" is invalid`) || !strings.Contains(res.stderr, "/do/0/sayHello") {
		t.Errorf("def apply of an unsupported call: %+v", res)
	}
	// Without document.name nothing is sent.
	if res := b.run("document: {dsl: '1.0.0'}\ndo: []\n", nil, "def", "apply", "-"); res.code != 1 || !strings.Contains(res.stderr, "/document/name: is required") {
		t.Errorf("def apply without document.name: %+v", res)
	}
}

// flowd def get prints a Serverless Workflow document that def apply takes
// back unchanged, and def list lists it, a document timeout included. (This
// needs a server that takes Serverless Workflow documents, and a client that
// decodes them.)
func TestCLIDefGetServerlessWorkflow(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	doc := greetDocument + "timeout:\n  after: {minutes: 5}\n"
	if res := b.run(doc, nil, "def", "apply", "-"); res.code != 0 {
		t.Fatalf("def apply: %+v", res)
	}
	got := b.run("", nil, "def", "get", "greet")
	if got.code != 0 || !strings.Contains(got.stdout, "sayHello") || !strings.Contains(got.stdout, "document") {
		t.Fatalf("def get: %+v", got)
	}
	if again := b.run(got.stdout, nil, "def", "apply", "-"); again.code != 0 || again.stdout != "definition greet revision 1 (unchanged)\n" {
		t.Errorf("def get greet | def apply -: %+v\ninput:\n%s", again, got.stdout)
	}
	if list := b.run("", nil, "def", "list"); list.code != 0 || !strings.Contains(list.stdout, "greet") {
		t.Errorf("def list: %+v", list)
	}
}
