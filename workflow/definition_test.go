package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// specExample is the reference example definition, verbatim.
const specExample = `name: order
timeout: 10m                 # whole-workflow timeout → TIMED_OUT
steps:
  - id: reserve
    type: task               # run by a handler: in-process Go function or remote worker
    handler: reserve-stock
    input: {sku: "{{ .input.sku }}"}
    retry: {max_attempts: 5, initial_backoff: 1s, max_backoff: 1m}
    timeout: 30s
  - id: approve
    type: wait               # completed from outside: POST …/steps/approve/complete
    depends_on: [reserve]
  - id: cool-off
    type: sleep
    duration: 5s
    depends_on: [approve]
  - id: notify
    type: http
    depends_on: [cool-off]
    request: {method: POST, url: "http://127.0.0.1:9000/hook", body: {order: "{{ .input.id }}"}}
`

// specExampleJSON is the same definition in JSON, keys in another order.
const specExampleJSON = `{
  "steps": [
    {"id": "reserve", "type": "task", "handler": "reserve-stock", "input": {"sku": "{{ .input.sku }}"},
     "retry": {"max_backoff": "1m", "initial_backoff": "1s", "max_attempts": 5}, "timeout": "30s"},
    {"id": "approve", "type": "wait", "depends_on": ["reserve"]},
    {"id": "cool-off", "type": "sleep", "duration": "5s", "depends_on": ["approve"]},
    {"id": "notify", "type": "http", "depends_on": ["cool-off"],
     "request": {"url": "http://127.0.0.1:9000/hook", "method": "POST", "body": {"order": "{{ .input.id }}"}}}
  ],
  "timeout": "600s",
  "name": "order"
}`

func mustParse(t *testing.T, doc string) *Definition {
	t.Helper()
	d, err := ParseDefinition([]byte(doc))
	if err != nil {
		t.Fatalf("ParseDefinition: %v", err)
	}
	return d
}

// problemsOf parses doc, which must be invalid, and returns the problems.
func problemsOf(t *testing.T, doc string) []string {
	t.Helper()
	d, err := ParseDefinition([]byte(doc))
	if err == nil {
		t.Fatalf("ParseDefinition accepted an invalid definition: %+v", d)
	}
	if d != nil {
		t.Errorf("ParseDefinition returned a definition with its error")
	}
	if !errors.Is(err, ErrInvalidDefinition) {
		t.Errorf("error %v does not match ErrInvalidDefinition", err)
	}
	var de *DefinitionError
	if !errors.As(err, &de) || len(de.Problems) == 0 {
		t.Fatalf("error %v is not a *DefinitionError with problems", err)
	}
	if want := "invalid definition: " + strings.Join(de.Problems, "; "); err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	return de.Problems
}

func TestParseSpecExample(t *testing.T) {
	t.Parallel()
	d := mustParse(t, specExample)
	if d.Name != "order" || time.Duration(d.Timeout) != 10*time.Minute || len(d.Steps) != 4 {
		t.Fatalf("definition = %+v", d)
	}
	reserve, ok := d.Step("reserve")
	if !ok || reserve.Type != StepTypeTask || reserve.Handler != "reserve-stock" ||
		time.Duration(reserve.Timeout) != 30*time.Second || string(reserve.Input) != `{"sku":"{{ .input.sku }}"}` {
		t.Errorf("reserve = %+v (input %s)", reserve, reserve.Input)
	}
	wantRetry := RetryPolicy{MaxAttempts: 5, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Minute)}
	if reserve.Retry == nil || *reserve.Retry != wantRetry {
		t.Errorf("reserve.retry = %+v", reserve.Retry)
	}
	if s, _ := d.Step("approve"); s.Type != StepTypeWait || !slices.Equal(s.DependsOn, []string{"reserve"}) {
		t.Errorf("approve = %+v", s)
	}
	if s, _ := d.Step("cool-off"); s.Type != StepTypeSleep || time.Duration(s.Duration) != 5*time.Second {
		t.Errorf("cool-off = %+v", s)
	}
	notify, _ := d.Step("notify")
	if r := notify.Request; r == nil || r.Method != "POST" || r.URL != "http://127.0.0.1:9000/hook" || string(r.Body) != `{"order":"{{ .input.id }}"}` {
		t.Errorf("notify.request = %+v", notify.Request)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseJSONFormIsTheSameDefinition(t *testing.T) {
	t.Parallel()
	fromYAML := mustParse(t, specExample)
	fromJSON := mustParse(t, specExampleJSON)
	a, err := fromYAML.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	b, err := fromJSON.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("canonical forms differ:\nyaml: %s\njson: %s", a, b)
	}
}

func TestParseKeepsJSONNumbersExact(t *testing.T) {
	t.Parallel()
	d := mustParse(t, `{"name":"n","steps":[{"id":"a","type":"task","handler":"echo","input":{"big":9007199254740993,"f":1.50}}]}`)
	if got := string(d.Steps[0].Input); got != `{"big":9007199254740993,"f":1.50}` {
		t.Errorf("input = %s", got)
	}
	c, _ := d.Canonical()
	if !strings.Contains(string(c), `"input":{"big":9007199254740993,"f":1.50}`) {
		t.Errorf("canonical = %s", c)
	}
}

func TestParseRejectsTypoNamingTheField(t *testing.T) {
	t.Parallel()
	got := problemsOf(t, `
name: x
steps:
  - id: a
    type: wait
  - id: b
    type: wait
    depend_on: [a]
`)
	want := []string{`steps[1] (b): unknown field "depend_on" (did you mean "depends_on"?)`}
	if !slices.Equal(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}

// TestParseProblems has one case per kind of problem; each asserts the exact
// list, so that a problem is reported once and nothing else is.
func TestParseProblems(t *testing.T) {
	t.Parallel()
	wait := "\n  - {id: w, type: wait}"
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"missing name", "steps:" + wait, []string{"name: is required"}},
		{"name with a space", "name: bad name\nsteps:" + wait,
			[]string{`name: "bad name" has character ' ' at offset 3 (allowed: A-Za-z0-9_.-)`}},
		{"name too long", "name: " + strings.Repeat("n", 129) + "\nsteps:" + wait,
			[]string{"name: is 129 characters long, at most 128 are allowed"}},
		{"name reserved", "name: '..'\nsteps:" + wait, []string{`name: ".." is reserved`}},
		{"name not a string", "name: 12\nsteps:" + wait, []string{"name: must be a string, not 12"}},
		{"no steps", "name: x", []string{"steps: at least one step is required"}},
		{"empty steps", "name: x\nsteps: []", []string{"steps: at least one step is required"}},
		{"steps not a list", "name: x\nsteps: {id: a}", []string{"steps: must be a list, not an object"}},
		{"step not an object", "name: x\nsteps: [7]", []string{"steps[0]: must be an object, not 7"}},
		{"missing step id", "name: x\nsteps:\n  - {type: wait}", []string{"steps[0]: id: is required"}},
		{"invalid step id", "name: x\nsteps:\n  - {id: a/b, type: wait}",
			[]string{`steps[0]: id: "a/b" has character '/' at offset 1 (allowed: A-Za-z0-9_.-)`}},
		{"duplicate step id", "name: x\nsteps:\n  - {id: a, type: wait}\n  - {id: a, type: wait}",
			[]string{`steps[1] (a): id: duplicate step id "a" (also steps[0])`}},
		{"missing type", "name: x\nsteps:\n  - {id: a}", []string{"steps[0] (a): type: is required (one of task, wait, sleep, http, workflow)"}},
		{"unknown type", "name: x\nsteps:\n  - {id: a, type: tsk, handler: h}",
			[]string{`steps[0] (a): type: unknown step type "tsk" (want one of task, wait, sleep, http, workflow)`}},
		{"unknown dependency", "name: x\nsteps:\n  - {id: a, type: wait, depends_on: [zz]}",
			[]string{`steps[0] (a): depends_on[0]: unknown step "zz"`}},
		{"self dependency", "name: x\nsteps:\n  - {id: a, type: wait, depends_on: [a]}",
			[]string{"steps[0] (a): depends_on[0]: a step cannot depend on itself"}},
		{"dependency listed twice", "name: x\nsteps:" + wait + "\n  - {id: a, type: wait, depends_on: [w, w]}",
			[]string{`steps[1] (a): depends_on[1]: "w" is listed twice`}},
		{"cycle of three", `name: x
steps:
  - {id: a, type: wait, depends_on: [c]}
  - {id: b, type: wait, depends_on: [a]}
  - {id: c, type: wait, depends_on: [b]}`,
			[]string{"steps: cycle: a → b → c → a (each step depends on the one before it)"}},
		{"two separate cycles", `name: x
steps:
  - {id: root, type: wait}
  - {id: p, type: wait, depends_on: [root, q]}
  - {id: q, type: wait, depends_on: [p]}
  - {id: r, type: wait, depends_on: [s]}
  - {id: s, type: wait, depends_on: [r, q]}`,
			[]string{
				"steps: cycle: p → q → p (each step depends on the one before it)",
				"steps: cycle: r → s → r (each step depends on the one before it)",
			}},
		{"task without handler", "name: x\nsteps:\n  - {id: a, type: task}", []string{"steps[0] (a): handler: is required for a task step"}},
		{"handler with a space", "name: x\nsteps:\n  - {id: a, type: task, handler: 'my handler'}",
			[]string{`steps[0] (a): handler: "my handler" has a space or control character at offset 2`}},
		{"handler not a string", "name: x\nsteps:\n  - {id: a, type: task, handler: 12}",
			[]string{"steps[0] (a): handler: must be a string, not 12"}},
		{"handler a list", "name: x\nsteps:\n  - {id: a, type: task, handler: [a]}",
			[]string{"steps[0] (a): handler: must be a string, not a list"}},
		{"handler on a wait step", "name: x\nsteps:\n  - {id: a, type: wait, handler: h}",
			[]string{"steps[0] (a): handler: only task steps have a handler"}},
		{"input on a wait step", "name: x\nsteps:\n  - {id: a, type: wait, input: {k: 1}}",
			[]string{"steps[0] (a): input: only task and workflow steps take an input"}},
		{"retry on a sleep step", "name: x\nsteps:\n  - {id: a, type: sleep, duration: 1s, retry: {max_attempts: 2}}",
			[]string{"steps[0] (a): retry: only task, http and workflow steps are retried"}},
		{"timeout on a wait step", "name: x\nsteps:\n  - {id: a, type: wait, timeout: 1s}",
			[]string{"steps[0] (a): timeout: only task, http and workflow steps have a per-attempt timeout"}},
		{"duration on a task step", "name: x\nsteps:\n  - {id: a, type: task, handler: h, duration: 1s}",
			[]string{"steps[0] (a): duration: only sleep steps have a duration"}},
		{"request on a task step", "name: x\nsteps:\n  - {id: a, type: task, handler: h, request: {method: GET, url: 'http://h/'}}",
			[]string{"steps[0] (a): request: only http steps have a request"}},
		{"sleep without duration", "name: x\nsteps:\n  - {id: a, type: sleep}",
			[]string{"steps[0] (a): duration: is required for a sleep step and must be positive"}},
		{"sleep of zero", "name: x\nsteps:\n  - {id: a, type: sleep, duration: 0s}",
			[]string{"steps[0] (a): duration: is required for a sleep step and must be positive"}},
		{"negative sleep", "name: x\nsteps:\n  - {id: a, type: sleep, duration: -1s}",
			[]string{`steps[0] (a): duration: duration "-1s" must not be negative`}},
		{"duration without a unit", "name: x\nsteps:\n  - {id: a, type: sleep, duration: 5}",
			[]string{`steps[0] (a): duration: want a duration string with a unit such as "30s", "10m" or "1h30m", not 5`}},
		{"unparsable duration", "name: x\nsteps:\n  - {id: a, type: sleep, duration: 5 minutes}",
			[]string{`steps[0] (a): duration: invalid duration "5 minutes" (want a Go duration such as "30s", "10m" or "1h30m")`}},
		{"negative workflow timeout", "name: x\ntimeout: -10m\nsteps:" + wait, []string{`timeout: duration "-10m" must not be negative`}},
		{"negative step timeout", "name: x\nsteps:\n  - {id: a, type: task, handler: h, timeout: -1s}",
			[]string{`steps[0] (a): timeout: duration "-1s" must not be negative`}},
		{"http without request", "name: x\nsteps:\n  - {id: a, type: http}", []string{"steps[0] (a): request: is required for an http step"}},
		{"http without method", "name: x\nsteps:\n  - {id: a, type: http, request: {url: 'http://h/'}}",
			[]string{"steps[0] (a): request.method: is required (one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS)"}},
		{"http bad method", "name: x\nsteps:\n  - {id: a, type: http, request: {method: post, url: 'http://h/'}}",
			[]string{`steps[0] (a): request.method: unknown method "post" (want one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS)`}},
		{"http empty url", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: ''}}",
			[]string{"steps[0] (a): request.url: is required"}},
		{"http url without scheme", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'example.com/hook'}}",
			[]string{`steps[0] (a): request.url: URL "example.com/hook" must start with http:// or https://`}},
		{"http url unparsable", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: '127.0.0.1:9000/hook'}}",
			[]string{`steps[0] (a): request.url: invalid URL: first path segment in URL cannot contain colon`}},
		{"http url scheme before a reference", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'ftp://{{ .input.host }}/'}}",
			[]string{`steps[0] (a): request.url: scheme "ftp" is not http or https`}},
		{"http url without host", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http:///x'}}",
			[]string{`steps[0] (a): request.url: URL "http:///x" has no host`}},
		{"http bad header name", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http://h/', headers: {'X A': v}}}",
			[]string{`steps[0] (a): request.headers["X A"]: is not a valid header name`}},
		{"http header names differing in case", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http://h/', headers: {X-A: v, x-a: w}}}",
			[]string{`steps[0] (a): request.headers.x-a: duplicates header "X-A" (header names are case-insensitive)`}},
		{"max_attempts zero", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {max_attempts: 0}}",
			[]string{"steps[0] (a): retry.max_attempts: must be between 1 and 1000 (leave it out for the default, 3)"}},
		{"max_attempts too big", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {max_attempts: 1001}}",
			[]string{"steps[0] (a): retry.max_attempts: must be between 1 and 1000"}},
		{"max_attempts negative", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http://h/'}, retry: {max_attempts: -1}}",
			[]string{"steps[0] (a): retry.max_attempts: must be between 1 and 1000"}},
		{"max_attempts not a number", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {max_attempts: three}}",
			[]string{"steps[0] (a): retry.max_attempts: must be an integer, not a string"}},
		{"initial_backoff zero", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {initial_backoff: 0s}}",
			[]string{"steps[0] (a): retry.initial_backoff: must be positive (leave it out for the default, 1s)"}},
		{"initial above max", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {initial_backoff: 10s, max_backoff: 5s}}",
			[]string{"steps[0] (a): retry: initial_backoff 10s exceeds max_backoff 5s"}},
		{"initial above default max", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {initial_backoff: 2m}}",
			[]string{"steps[0] (a): retry: initial_backoff 2m exceeds max_backoff 1m (the default)"}},
		{"negative backoff", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {max_backoff: -1s}}",
			[]string{`steps[0] (a): retry.max_backoff: duration "-1s" must not be negative`}},
		{"unknown retry field", "name: x\nsteps:\n  - {id: a, type: task, handler: h, retry: {attempts: 2}}",
			[]string{`steps[0] (a): retry: unknown field "attempts" (known: max_attempts, initial_backoff, max_backoff)`}},
		{"unknown top-level field", "name: x\nsteps:" + wait + "\ndescription: hi",
			[]string{`unknown field "description" (known: name, revision, timeout, retention, steps, code, retry, output, concurrency, priority, search)`}},
		{"field in the wrong case", "Name: x\nsteps:" + wait,
			[]string{`unknown field "Name" (did you mean "name"?)`, "name: is required"}},
		{"template syntax", "name: x\nsteps:\n  - {id: a, type: task, handler: h, input: {sku: '{{ input.sku }}'}}",
			[]string{`steps[0] (a): input.sku: invalid reference "{{ input.sku }}": a reference starts with a dot: .input… or .steps.STEP.output…`}},
		{"template unknown step", "name: x\nsteps:\n  - {id: a, type: task, handler: h, input: ['{{ .steps.zz.output }}']}",
			[]string{`steps[0] (a): input[0]: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`}},
		{"template step not an ancestor", `name: x
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, input: {v: "{{ .steps.a.output.v }}"}}`,
			[]string{`steps[1] (b): input.v: {{ .steps.a.output.v }}: step "a" is not an ancestor of "b" (add it to depends_on, directly or through another step)`}},
		{"template own output", "name: x\nsteps:\n  - {id: a, type: task, handler: h, input: '{{ .steps.a.output }}'}",
			[]string{"steps[0] (a): input: {{ .steps.a.output }}: a step cannot use its own output"}},
		{"template in url", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http://h/{{ .input.x'}}",
			[]string{`steps[0] (a): request.url: unterminated "{{" at offset 9 (no closing "}}")`}},
		{"template in header", "name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http://h/', headers: {X-Id: '{{ .foo }}'}}}",
			[]string{`steps[0] (a): request.headers.X-Id: invalid reference "{{ .foo }}": unknown root ".foo" (want .input or .steps.STEP.output)`}},
		{"template in body", "name: x\nsteps:\n  - {id: a, type: http, request: {method: POST, url: 'http://h/', body: {a: ['{{ .steps.x }}']}}}",
			[]string{`steps[0] (a): request.body.a[0]: invalid reference "{{ .steps.x }}": want .steps.STEP.output: no ".output" after the step id`}},
		{"yaml syntax", "name: x\nsteps: [\n", []string{"syntax: yaml: line 2: did not find expected node content"}},
		{"yaml duplicate key", "name: x\nname: y\nsteps:" + wait,
			[]string{`syntax: line 2: key "name" already set in map`}},
		{"second yaml document", "name: x\nsteps:" + wait + "\n---\nname: y\n", []string{"syntax: line 4: a second YAML document starts here; a definition is one document"}},
		{"json duplicate key", `{"name": "x", "name": "y", "steps": [{"id": "a", "type": "wait"}]}`, []string{`duplicate field "name"`}},
		{"json duplicate key inside input", `{"name": "x", "steps": [{"id": "a", "type": "task", "handler": "h", "input": {"k": 1, "k": 2}}]}`,
			[]string{`steps[0] (a): input.k: duplicate key "k"`}},
		{"not an object", "[1, 2]", []string{"a definition must be an object (a mapping with name and steps), not a list"}},
		{"only a comment", "# nothing\n", []string{"a definition must be an object (a mapping with name and steps), not null"}},
		{"empty", " \n", []string{"the definition is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := problemsOf(t, tc.doc); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

func TestParseListsEveryProblem(t *testing.T) {
	t.Parallel()
	got := problemsOf(t, `
name: bad name
timeout: -5s
steps:
  - id: a
    type: task
    depends_on: [c, zz]
    retry: {max_attempts: 5000}
    input: {x: "{{ .steps.b.output }}", y: "{{ .foo }}"}
  - id: b
    type: sleep
    handler: h
    depends_on: [a]
  - id: c
    type: http
    depends_on: [b]
    request: {method: GET, url: ""}
  - id: c
    type: wait
    priority: 1
`)
	want := []string{
		`timeout: duration "-5s" must not be negative`,
		`name: "bad name" has character ' ' at offset 3 (allowed: A-Za-z0-9_.-)`,
		"steps[0] (a): handler: is required for a task step",
		"steps[0] (a): retry.max_attempts: must be between 1 and 1000",
		`steps[0] (a): depends_on[1]: unknown step "zz"`,
		`steps[0] (a): input.y: invalid reference "{{ .foo }}": unknown root ".foo" (want .input or .steps.STEP.output)`,
		"steps[1] (b): handler: only task steps have a handler",
		"steps[1] (b): duration: is required for a sleep step and must be positive",
		"steps[2] (c): request.url: is required",
		`steps[3] (c): unknown field "priority" (known: id, type, handler, input, retry, timeout, depends_on, duration, request, when, join, foreach, max_concurrency, event, key, definition, concurrency, rate_limit)`,
		`steps[3] (c): id: duplicate step id "c" (also steps[2])`,
		"steps: cycle: a → b → c → a (each step depends on the one before it)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestParseListsEveryTemplateProblem: a bad reference never hides another
// problem, in the same string, the same template, another field or another
// step; each is named by step, field and reference, in template order.
func TestParseListsEveryTemplateProblem(t *testing.T) {
	t.Parallel()
	notAncestor := func(loc, ref, step, of string) string {
		return fmt.Sprintf(`%s: %s: step %q is not an ancestor of %q (add it to depends_on, directly or through another step)`, loc, ref, step, of)
	}
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"two bad references in one string", `name: x
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, input: "{{ .steps.zz.output }}-{{ .steps.a.output }}-{{ .nope }}"}`,
			[]string{
				`steps[1] (b): input: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`,
				notAncestor("steps[1] (b): input", "{{ .steps.a.output }}", "a", "b"),
				`steps[1] (b): input: invalid reference "{{ .nope }}": unknown root ".nope" (want .input or .steps.STEP.output)`,
			}},
		{"syntax problem and ancestry problems in one input", `name: x
steps:
  - {id: a, type: task, handler: h}
  - id: b
    type: task
    handler: h
    input: {p: "{{ .steps.zz.output }}", q: ["{{ .steps.a.output.k }}", "{{ .steps.b.output }}"], r: "{{ .input.ok }}"}`,
			[]string{
				`steps[1] (b): input.p: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`,
				notAncestor("steps[1] (b): input.q[0]", "{{ .steps.a.output.k }}", "a", "b"),
				`steps[1] (b): input.q[1]: {{ .steps.b.output }}: a step cannot use its own output`,
			}},
		{"bad references in two steps and an unknown dependency", `name: x
steps:
  - {id: a, type: task, handler: h, input: "{{ .steps.c.output }}"}
  - {id: b, type: task, handler: h, depends_on: [zz], input: {v: "{{ .steps.yy.output }}"}}
  - {id: c, type: task, handler: h, input: "{{ .input..k }}"}`,
			[]string{
				notAncestor("steps[0] (a): input", "{{ .steps.c.output }}", "c", "a"),
				`steps[1] (b): depends_on[0]: unknown step "zz"`,
				`steps[1] (b): input.v: invalid reference "{{ .steps.yy.output }}": unknown step "yy"`,
				`steps[2] (c): input: invalid reference "{{ .input..k }}": empty key (two dots in a row or a trailing dot)`,
			}},
		{"every templated field of an http step", `name: x
steps:
  - {id: w, type: wait}
  - id: call
    type: http
    request:
      method: POST
      url: "http://h/{{ .steps.w.output.id }}/{{ .steps.zz.output }}"
      headers: {X-B: "{{ .steps.call.output }}", X-A: "{{ input }}"}
      body: {a: "{{ .steps.w.output }}", b: "{{ .steps.nope.output }}"}`,
			[]string{
				notAncestor("steps[1] (call): request.url", "{{ .steps.w.output.id }}", "w", "call"),
				`steps[1] (call): request.url: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`,
				`steps[1] (call): request.headers.X-A: invalid reference "{{ input }}": a reference starts with a dot: .input… or .steps.STEP.output…`,
				`steps[1] (call): request.headers.X-B: {{ .steps.call.output }}: a step cannot use its own output`,
				notAncestor("steps[1] (call): request.body.a", "{{ .steps.w.output }}", "w", "call"),
				`steps[1] (call): request.body.b: invalid reference "{{ .steps.nope.output }}": unknown step "nope"`,
			}},
		{"templates of a step whose type is unknown", `name: x
steps:
  - {id: a, type: tsk, handler: h, input: "{{ .steps.zz.output }}"}`,
			[]string{
				`steps[0] (a): type: unknown step type "tsk" (want one of task, wait, sleep, http, workflow)`,
				`steps[0] (a): input: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`,
			}},
		{"unreadable depends_on does not add ancestry noise", `name: x
steps:
  - {id: a, type: task, handler: h}
  - {id: b, type: task, handler: h, depends_on: a, input: ["{{ .steps.a.output }}", "{{ .steps.zz.output }}"]}`,
			[]string{
				"steps[1] (b): depends_on: must be a list, not a string",
				`steps[1] (b): input[1]: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := problemsOf(t, tc.doc); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestValidateGoBuiltDefinition covers what only a definition built in Go can
// hold: negative values that decoding would already refuse.
func TestValidateGoBuiltDefinition(t *testing.T) {
	t.Parallel()
	d := &Definition{
		Name:     "x",
		Revision: -1,
		Timeout:  Duration(-time.Second),
		Steps: []Step{
			{ID: "a", Type: StepTypeTask, Handler: "h", Timeout: Duration(-time.Second),
				Retry: &RetryPolicy{MaxAttempts: -2, InitialBackoff: Duration(-1)}},
			{ID: "b", Type: StepTypeSleep, Duration: Duration(-time.Second), DependsOn: []string{"a"}},
			{ID: "c", Type: StepTypeTask, Handler: "h", Retry: &RetryPolicy{}, DependsOn: []string{"b"}},
		},
	}
	err := d.Validate()
	var de *DefinitionError
	if !errors.As(err, &de) {
		t.Fatalf("Validate = %v", err)
	}
	want := []string{
		"revision: must not be negative",
		"timeout: must not be negative",
		"steps[0] (a): timeout: must not be negative",
		"steps[0] (a): retry.max_attempts: must be between 1 and 1000",
		"steps[0] (a): retry.initial_backoff: must not be negative",
		"steps[1] (b): duration: must not be negative",
	}
	if !slices.Equal(de.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(de.Problems, "\n"), strings.Join(want, "\n"))
	}
	// A zero retry field built in Go means "the default": valid.
	ok := &Definition{Name: "x", Steps: []Step{{ID: "c", Type: StepTypeTask, Handler: "h", Retry: &RetryPolicy{}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestDottedStepIDsInDefinitions(t *testing.T) {
	t.Parallel()
	d := mustParse(t, `
name: dots
steps:
  - {id: fetch.user, type: task, handler: echo}
  - id: greet
    type: task
    handler: echo
    depends_on: [fetch.user]
    input: {name: "{{ .steps.fetch.user.output.name }}"}
`)
	s, _ := d.Step("greet")
	tpl, err := CompileTemplate(s.Input, d.HasStep)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(nil, map[string]json.RawMessage{"fetch.user": json.RawMessage(`{"name":"Ada"}`)}, 0)
	if err != nil || string(out) != `{"name":"Ada"}` {
		t.Errorf("Render = %s, %v", out, err)
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		out  string
	}{
		{`"30s"`, 30 * time.Second, `"30s"`},
		{`"10m"`, 10 * time.Minute, `"10m"`},
		{`"60s"`, time.Minute, `"1m"`},
		{`"1h30m"`, 90 * time.Minute, `"1h30m"`},
		{`"2h"`, 2 * time.Hour, `"2h"`},
		{`"1h0m5s"`, time.Hour + 5*time.Second, `"1h0m5s"`},
		{`"1.5s"`, 1500 * time.Millisecond, `"1.5s"`},
		{`"250ms"`, 250 * time.Millisecond, `"250ms"`},
		{`"0s"`, 0, `"0s"`},
		{`"0"`, 0, `"0s"`},
	} {
		var d Duration
		if err := json.Unmarshal([]byte(tc.in), &d); err != nil || time.Duration(d) != tc.want {
			t.Errorf("unmarshal %s = %v, %v; want %v", tc.in, time.Duration(d), err, tc.want)
		}
		if b, err := json.Marshal(d); err != nil || string(b) != tc.out {
			t.Errorf("marshal %v = %s, %v; want %s", tc.want, b, err, tc.out)
		}
	}
	for _, bad := range []string{`"-1s"`, `"abc"`, `""`, `"5"`, `30`, `true`, `{}`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("unmarshal %s: no error", bad)
		}
	}
	d := Duration(time.Second)
	if err := json.Unmarshal([]byte(`null`), &d); err != nil || d != Duration(time.Second) {
		t.Errorf("null changed the duration: %v %v", d, err)
	}
}

func TestRetryPolicyOrDefault(t *testing.T) {
	t.Parallel()
	def := RetryPolicy{MaxAttempts: 3, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Minute)}
	if got := (Step{}).RetryPolicyOrDefault(); got != def {
		t.Errorf("no retry block = %+v", got)
	}
	got := Step{Retry: &RetryPolicy{MaxAttempts: 7}}.RetryPolicyOrDefault()
	if want := (RetryPolicy{MaxAttempts: 7, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Minute)}); got != want {
		t.Errorf("partial retry block = %+v", got)
	}
	got = Step{Retry: &RetryPolicy{InitialBackoff: Duration(2 * time.Second), MaxBackoff: Duration(time.Hour)}}.RetryPolicyOrDefault()
	if want := (RetryPolicy{MaxAttempts: 3, InitialBackoff: Duration(2 * time.Second), MaxBackoff: Duration(time.Hour)}); got != want {
		t.Errorf("partial retry block = %+v", got)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{InitialBackoff: Duration(time.Second), MaxBackoff: Duration(10 * time.Second)}
	low := func() float64 { return 0 }
	high := func() float64 { return math.Nextafter(1, 0) }
	mid := func() float64 { return 0.5 }
	for _, tc := range []struct {
		attempt int
		rnd     func() float64
		want    time.Duration
	}{
		{1, low, 500 * time.Millisecond},
		{1, mid, 750 * time.Millisecond},
		{1, high, time.Second - 1},
		{2, low, time.Second},
		{2, mid, 1500 * time.Millisecond},
		{3, low, 2 * time.Second},
		{4, mid, 6 * time.Second},
		{5, low, 5 * time.Second}, // 16s capped at 10s
		{5, high, 10*time.Second - 1},
		{1000, mid, 7500 * time.Millisecond},
		{math.MaxInt, low, 5 * time.Second},
		{0, low, 500 * time.Millisecond}, // attempts are numbered from 1
		{-3, low, 500 * time.Millisecond},
		{1, func() float64 { return math.NaN() }, 500 * time.Millisecond},
		{1, func() float64 { return 7 }, time.Second},
	} {
		if got := p.Backoff(tc.attempt, tc.rnd); got != tc.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", tc.attempt, tc.rnd(), got, tc.want)
		}
	}
	// The zero policy uses the defaults: 1s doubling, capped at 1m.
	if got := (RetryPolicy{}).Backoff(1, high); got != time.Second-1 {
		t.Errorf("default first backoff = %v", got)
	}
	if got := (RetryPolicy{}).Backoff(30, low); got != 30*time.Second {
		t.Errorf("default capped backoff = %v", got)
	}
	// A huge cap must not overflow while doubling.
	huge := RetryPolicy{InitialBackoff: Duration(time.Hour), MaxBackoff: Duration(math.MaxInt64)}
	for a := 1; a < 80; a++ {
		if got := huge.Backoff(a, low); got <= 0 {
			t.Fatalf("Backoff(%d) overflowed: %v", a, got)
		}
	}
	// nil rnd uses math/rand and stays within [base/2, base].
	for range 100 {
		if got := p.Backoff(2, nil); got < time.Second || got > 2*time.Second {
			t.Fatalf("Backoff with nil rnd = %v", got)
		}
	}
}

const diamond = `
name: diamond
steps:
  - {id: d, type: task, handler: echo, depends_on: [b, c]}
  - {id: b, type: task, handler: echo, depends_on: [a]}
  - {id: a, type: task, handler: echo}
  - {id: c, type: wait, depends_on: [a]}
  - {id: lone, type: sleep, duration: 1s}
`

func TestDAGHelpersOnADiamond(t *testing.T) {
	t.Parallel()
	d := mustParse(t, diamond)
	if got := d.Roots(); !slices.Equal(got, []string{"a", "lone"}) {
		t.Errorf("Roots = %v", got)
	}
	if got := d.TopoOrder(); !slices.Equal(got, []string{"a", "b", "c", "d", "lone"}) {
		t.Errorf("TopoOrder = %v", got)
	}
	for id, want := range map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": nil, "lone": nil, "zz": nil} {
		if got := d.Dependents(id); !slices.Equal(got, want) {
			t.Errorf("Dependents(%s) = %v, want %v", id, got, want)
		}
	}
	for id, want := range map[string][]string{"d": {"a", "b", "c"}, "b": {"a"}, "a": nil, "lone": nil} {
		got := d.Ancestors(id)
		if len(got) != len(want) {
			t.Errorf("Ancestors(%s) = %v, want %v", id, got, want)
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("Ancestors(%s) = %v, want %v", id, got, want)
			}
		}
	}
	if s, ok := d.Step("c"); !ok || s.Type != StepTypeWait {
		t.Errorf("Step(c) = %+v, %v", s, ok)
	}
	if _, ok := d.Step("zz"); ok || d.HasStep("zz") || !d.HasStep("lone") {
		t.Error("Step/HasStep found an unknown step or missed a known one")
	}

	st := d.InitialState()
	if len(st.Steps) != 5 || st.Variables == nil {
		t.Fatalf("InitialState = %+v", st)
	}
	for id, s := range st.Steps {
		if s.Status != StepPending || s.Attempts != 0 || s.Output != nil {
			t.Errorf("initial step %s = %+v", id, s)
		}
	}
	if err := st.Validate(); err != nil {
		t.Errorf("initial state is invalid: %v", err)
	}
}

// TestTopoOrderOfAnInvalidDefinition: the helpers must not loop or panic on a
// definition that Validate would reject.
func TestTopoOrderOfAnInvalidDefinition(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "bad", Steps: []Step{
		{ID: "a", Type: StepTypeWait},
		{ID: "b", Type: StepTypeWait, DependsOn: []string{"c", "a"}},
		{ID: "c", Type: StepTypeWait, DependsOn: []string{"b"}},
		{ID: "d", Type: StepTypeWait, DependsOn: []string{"c"}},
		{ID: "e", Type: StepTypeWait, DependsOn: []string{"zz"}},
		{ID: "f", Type: StepTypeWait, DependsOn: []string{"a", "a"}},
		{ID: "a", Type: StepTypeWait},
		{ID: "g", Type: StepTypeWait, DependsOn: []string{"g"}},
	}}
	if got := d.TopoOrder(); !slices.Equal(got, []string{"a", "f"}) {
		t.Errorf("TopoOrder = %v", got)
	}
	if got := d.Ancestors("d"); len(got) != 3 || !got["a"] || !got["b"] || !got["c"] {
		t.Errorf("Ancestors(d) = %v", got)
	}
	if got := d.Ancestors("b"); !got["b"] {
		t.Errorf("Ancestors(b) = %v, want b itself: it is on a cycle", got)
	}
	if err := d.Validate(); !errors.Is(err, ErrInvalidDefinition) {
		t.Errorf("Validate = %v", err)
	}
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	a := mustParse(t, `
name: c
revision: 7
timeout: 3600s
steps:
  - id: s
    type: task
    handler: echo
    retry: {}
    depends_on: []
    input: {z: 1.50, a: [true, null, "x<&>"], m: {y: 9007199254740993, b: "{{ .input }}"}}
`)
	b := mustParse(t, `{"name":"c","timeout":"1h","steps":[{"id":"s","type":"task","handler":"echo",
		"input":{"a":[true,null,"x<&>"],"m":{"b":"{{ .input }}","y":9007199254740993},"z":1.50}}]}`)
	ca, err := a.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"c","timeout":"1h","steps":[{"id":"s","type":"task","handler":"echo","input":{"a":[true,null,"x<&>"],"m":{"b":"{{ .input }}","y":9007199254740993},"z":1.50}}]}`
	if string(ca) != want {
		t.Errorf("canonical from YAML:\n got %s\nwant %s", ca, want)
	}
	if string(cb) != want {
		t.Errorf("canonical from JSON:\n got %s\nwant %s", cb, want)
	}
	if a.Revision != 7 {
		t.Errorf("Canonical changed the definition: revision %d", a.Revision)
	}
	again, err := mustParse(t, string(ca)).Canonical()
	if err != nil || string(again) != string(ca) {
		t.Errorf("canonical is not a fixed point:\n%s\n%s", ca, again)
	}
	// A store may read it back with plain encoding/json.
	var plain Definition
	if err := json.Unmarshal(ca, &plain); err != nil {
		t.Fatal(err)
	}
	if again, err := plain.Canonical(); err != nil || string(again) != string(ca) {
		t.Errorf("json.Unmarshal of the canonical form:\n%s\n%s", ca, again)
	}
	// json.Marshal keeps the revision, for API responses.
	if b, _ := json.Marshal(a); !strings.Contains(string(b), `"revision":7`) || !strings.Contains(string(b), `"timeout":"1h"`) {
		t.Errorf("json.Marshal = %s", b)
	}
}

// TestYAMLScalars checks the YAML conversion: YAML 1.2 booleans (only
// true/false), keys as written, numbers with their exact text, anchors and
// merge keys.
func TestYAMLScalars(t *testing.T) {
	t.Parallel()
	d := mustParse(t, `
name: x
steps:
  - id: a
    type: task
    handler: h
    input:
      country: NO
      answers: [yes, no, on, off, y, n, true, False, TRUE]
      y: 1
      1: one
      true: key
      big: 9007199254740993
      bigger: 123456789012345678901234
      float: 1.50
      exp: 1e3
      hex: 0x1F
      plus: +1
      none: ~
      empty:
      quoted: "{{ .input.q }}"
      multi: |
        line 1
        line 2
      anchor: &x {k: 1}
      alias: *x
      merged: {<<: *x, z: 2}
`)
	want := `{"1":"one","alias":{"k":1},"anchor":{"k":1},` +
		`"answers":["yes","no","on","off","y","n",true,false,true],` +
		`"big":9007199254740993,"bigger":123456789012345678901234,"country":"NO","empty":null,"exp":1e3,` +
		`"float":1.50,"hex":31,"merged":{"k":1,"z":2},"multi":"line 1\nline 2\n","none":null,"plus":1,` +
		`"quoted":"{{ .input.q }}","true":"key","y":1}`
	if got := string(d.Steps[0].Input); got != want {
		t.Errorf("input:\n got %s\nwant %s", got, want)
	}
	for doc, want := range map[string]string{
		"name: x\nsteps: [{id: a, type: task, handler: h, input: {f: .inf}}]":    `syntax: ".inf" has no JSON form`,
		"name: x\nsteps: [{id: a, type: task, handler: h, input: {k: 1, k: 2}}]": `syntax: line 2: key "k" already set in map`,
		"name: x\nsteps: [{id: a, type: task, handler: h, input: {[1]: 2}}]":     "syntax: line 2: cannot unmarshal !!seq into string",
		"a: &a [*a]": "syntax: yaml: anchor 'a' value contains itself",
	} {
		if got := problemsOf(t, doc); len(got) != 1 || got[0] != want {
			t.Errorf("%q: problems %q, want %q", doc, got, want)
		}
	}
}

func TestExamplesParse(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"approval-or-timeout.yaml", "deploy.yaml", "fanout-list.yaml", "fanout.yaml", "http-retry.yaml", "order-line.yaml", "order-lines.yaml", "order.yaml", "payment-event.yaml"}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if !slices.Equal(names, want) {
		t.Errorf("examples = %v, want %v", names, want)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ParseDefinition(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if base := strings.TrimSuffix(filepath.Base(f), ".yaml"); d.Name != base {
			t.Errorf("%s: name %q, want %q", f, d.Name, base)
		}
		for _, s := range d.Steps {
			if s.Type == StepTypeTask && !slices.Contains([]string{"echo", "sleep", "fail"}, s.Handler) {
				t.Errorf("%s: step %s uses handler %q, which is not a demo handler", f, s.ID, s.Handler)
			}
		}
	}
	order := mustParseFile(t, "../examples/order.yaml")
	if got := order.TopoOrder(); !slices.Equal(got, []string{"reserve", "approve", "cool-off", "ship"}) {
		t.Errorf("order.yaml runs %v", got)
	}
	if s, _ := order.Step("cool-off"); time.Duration(s.Duration) != 2*time.Second {
		t.Errorf("cool-off sleeps %v", time.Duration(s.Duration))
	}
	fan := mustParseFile(t, "../examples/fanout.yaml")
	if got := fan.Dependents("split"); len(got) != 3 {
		t.Errorf("fanout.yaml: split fans out to %v", got)
	}
	hook := mustParseFile(t, "../examples/http-retry.yaml")
	s := hook.Steps[0]
	if s.Type != StepTypeHTTP || s.Request.URL != "http://127.0.0.1:9999/hook" ||
		s.RetryPolicyOrDefault().MaxAttempts != 5 || time.Duration(s.RetryPolicyOrDefault().InitialBackoff) != time.Second {
		t.Errorf("http-retry.yaml: first step = %+v", s)
	}
}

func mustParseFile(t *testing.T, path string) *Definition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, string(data))
}

func FuzzParseDefinition(f *testing.F) {
	f.Add(specExample)
	f.Add(specExampleJSON)
	f.Add(diamond)
	for _, name := range []string{"order", "fanout", "http-retry"} {
		if data, err := os.ReadFile("../examples/" + name + ".yaml"); err == nil {
			f.Add(string(data))
		}
	}
	f.Add("name: x\nsteps:\n  - {id: a, type: wait, depends_on: [a]}")
	f.Add("name: x\nsteps:\n  - {id: a, type: wait, depends_on: [b]}\n  - {id: b, type: wait, depends_on: [a]}")
	f.Add(`{"name":"x","steps":[{"id":"a","type":"task","handler":"h","input":{"k":"{{ .input.k }} and {{ .steps.a.output }}"}}]}`)
	f.Add("name: x\nsteps:\n  - {id: a, type: http, request: {method: GET, url: 'http://h/{{ .input.p }}', headers: {X: '{{'}}}}")
	f.Add("a: &a [*a]")
	f.Add("---\nname: x\n---\n")
	f.Add("name: x\nsteps: [{id: a, type: sleep, duration: 9223372036854775807ns}]")
	f.Fuzz(func(t *testing.T, doc string) {
		d, err := ParseDefinition([]byte(doc))
		if err != nil {
			var de *DefinitionError
			if !errors.Is(err, ErrInvalidDefinition) || !errors.As(err, &de) || len(de.Problems) == 0 {
				t.Fatalf("error %v is not a *DefinitionError with problems", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("parsed definition does not validate: %v", err)
		}
		if got := d.TopoOrder(); len(got) != len(d.Steps) {
			t.Fatalf("TopoOrder = %v for %d steps", got, len(d.Steps))
		}
		c, err := d.Canonical()
		if err != nil {
			t.Fatalf("Canonical: %v", err)
		}
		d2, err := ParseDefinition(c)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, c)
		}
		c2, err := d2.Canonical()
		if err != nil || string(c2) != string(c) {
			t.Fatalf("canonical form is not stable:\n%s\n%s", c, c2)
		}
	})
}
