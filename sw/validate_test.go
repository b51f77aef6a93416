package sw

import (
	"errors"
	"strings"
	"testing"
)

func TestIsDocument(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{ctkHead + "do: []", true},
		{`{"document":{"dsl":"1.0.0"}}`, true},
		{"document:\n  dsl: '0.8'\n", false},
		{"document:\n  dsl: 1.0\n", false}, // a number, not a string
		{"name: dag\nsteps: []\n", false},
		{"- a\n- b\n", false},
		{"{", false},
		{"", false},
	} {
		if got := IsDocument([]byte(tc.doc)); got != tc.want {
			t.Errorf("IsDocument(%q) = %v", tc.doc, got)
		}
	}
}

func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"not a mapping", "- a", []string{"/: a document must be a mapping with document and do, not a list"}},
		{"yaml syntax", "document: [", nil},
		{"two yaml documents", ctkHead + "do:\n  - a:\n      set: {a: 1}\n---\n" + ctkHead, nil},
		{"document fields", "document:\n  dsl: '0.9'\ndo:\n  - a:\n      set: {a: 1}\n", []string{
			"/document/dsl: dsl must be a version 1.0.x",
			"/document/name: name must be a non-empty string, not null",
			"/document/namespace: namespace must be a non-empty string, not null",
			"/document/version: version must be a non-empty string, not null",
		}},
		{"empty do", ctkHead + "do: []\n", []string{
			"/do: must be a non-empty list of tasks (each a mapping of one task name to its definition), not a list",
		}},
		{"several problems", ctkHead + `use:
  catalogs:
    global:
      endpoint: https://example.com
do:
  - a:
      call: grpc
  - b:
      run:
        container:
          image: alpine
  - c:
      set:
        x: ${ .a | }
      then: nowhere
  - d:
      call: http
      with:
        method: get
        endpoint:
          uri: https://example.com
          authentication:
            digest:
              username: a
              password: b
  - e:
      unknownTask: {}
  - f:
      wait: PT1X
  - g:
      if: '.a =='
      set:
        a: 1
`, []string{
			"/use/catalogs: catalogs are not supported",
			"/do/0/a/call: call: grpc is not supported (supported: http, openapi, or the name of a flowd handler)",
			"/do/1/b/run: run: container is not supported (supported: workflow)",
			"/do/2/c/set/x: expression is not a jq program: unexpected EOF",
			"/do/3/d/with/endpoint/authentication/digest: digest authentication is not supported (supported: basic, bearer)",
			"/do/4/e: unknown task: it has none of call, do, emit, for, fork, listen, raise, run, set, switch, try, wait",
			`/do/5/f/wait: "PT1X" is not an ISO 8601 duration such as PT30S or P1DT2H`,
			"/do/6/g/if: expression is not a jq program: unexpected EOF",
			`/do/2/c/then: "nowhere" is not a task of this list (nor continue, exit, end)`,
		}},
		{"references", ctkHead + `do:
  - a:
      raise:
        error: missing
  - b:
      try:
        - x:
            set: {a: 1}
      catch:
        retry: missing
  - c:
      call: http
      with:
        method: get
        endpoint:
          uri: https://example.com
          authentication:
            use: missing
  - d:
      set: {a: 1}
      timeout: missing
`, []string{
			`/do/0/a/raise/error: "missing" is not declared under use.errors`,
			`/do/1/b/catch/retry: "missing" is not declared under use.retries`,
			`/do/2/c/with/endpoint/authentication/use: "missing" is not declared under use.authentications`,
			`/do/3/d/timeout: "missing" is not declared under use.timeouts`,
		}},
		{"structure", ctkHead + `do:
  - a:
      set: {a: 1}
    b:
      set: {b: 1}
  - c:
      set: {c: 1}
      output: .x
  - c:
      for:
        in: .items
        as: wrong
      do:
        - x:
            set: {a: 1}
  - e:
      fork:
        branches:
          - p:
              set: {a: 1}
              then: q
          - q:
              set: {a: 1}
  - f:
      listen:
        to:
          one:
            with:
              type: t
              source: s
  - g:
      switch:
        - one:
            when: .a
            then: nowhere
  - h:
      call: helper
      with:
        a: ${ $nope }
`, []string{
			"/do/0: a task must be a mapping of one task name to its definition",
			"/do/1/c/output: output must be an object, not a string",
			`/do/2/c: task name "c" is used twice in this list`,
			`/do/2/c/for/as: unknown field "as" (allowed: each, in, at)`,
			"/do/3/e/fork/branches/0/p/then: a fork branch cannot go to another task (use continue, exit or end)",
			"/do/4/f/listen/to/one/with/source: filtering events on source is not supported (supported: type, subject)",
			"/do/6/h/with/a: expression does not compile: variable not defined: $nope",
			`/do/5/g/switch/0/one/then: "nowhere" is not a task of this list (nor continue, exit, end)`,
		}},
		{"handler names", ctkHead + `do:
  - a:
      call: flowd:tick
  - b:
      call: "two words"
  - c:
      call: ""
`, []string{
			"/do/0/a/call: call: flowd:tick names a queue of the engine's own, not a handler",
			`/do/1/b/call: call: the handler name "two words" has a space or control character at offset 3`,
			"/do/2/c/call: call must be a non-empty string, not an empty string",
		}},
		{"listen filters", ctkHead + `do:
  - l:
      listen:
        to:
          all:
            - with:
                type: ${ .kind }
            - with:
                type: paid
                subject: ${ $nope }
`, []string{
			"/do/0/l/listen/to/all/0/with/type: an event type given by an expression is not supported (write the type)",
			"/do/0/l/listen/to/all/1/with/subject: expression does not compile: variable not defined: $nope",
		}},
		{"try and retry", ctkHead + `do:
  - t:
      try:
        - x:
            set: {a: 1}
      catch:
        as: err
        when: $error.status
        retry:
          delay: 3s
          backoff:
            quadratic: {}
          limit:
            attempt:
              count: -1
`, []string{
			"/do/0/t/catch/when: expression does not compile: variable not defined: $error",
			`/do/0/t/catch/retry/delay: "3s" is not an ISO 8601 duration such as PT30S or P1DT2H`,
			`/do/0/t/catch/retry/backoff/quadratic: unknown field "quadratic" (allowed: constant, linear, exponential)`,
			"/do/0/t/catch/retry/limit/attempt/count: count must be a non-negative integer",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var ps *Problems
			if !errors.As(err, &ps) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse: %v, want *Problems", err)
			}
			if tc.want == nil {
				if len(ps.List) != 1 || !strings.HasPrefix(ps.List[0], "/: syntax: ") {
					t.Errorf("problems %q, want one syntax problem", ps.List)
				}
				return
			}
			if got := strings.Join(ps.List, "\n"); got != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParseKeepsNumbersExactAndTheDocument(t *testing.T) {
	w, err := Parse([]byte(ctkHead + "timeout:\n  after: PT1M\ndo:\n  - a:\n      set:\n        big: 12345678901234567890\n        dec: 1.50\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(w.JSON), `"big":12345678901234567890`) || !strings.Contains(string(w.JSON), `"dec":1.50`) {
		t.Errorf("JSON %s", w.JSON)
	}
	if w.Name != "ctk" || w.Namespace != "default" || w.Version != "1.0.0" || w.DSL != "1.0.3" || w.Timeout.String() != "1m0s" {
		t.Errorf("workflow %+v", w)
	}
	d := newDriver(t, ctkHead+"do:\n  - a:\n      set:\n        big: 12345678901234567890\n        sum: ${ .n + 1 }\n")
	d.run(`{"n":9007199254740993}`)
	d.wantOutput(`{"big":12345678901234567890,"sum":9007199254740994}`)
}

func TestDurations(t *testing.T) {
	for in, want := range map[string]string{"PT30S": "30s", "P1DT2H": "26h0m0s", "PT0.5S": "500ms", "PT1H15M": "1h15m0s"} {
		d, err := parseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("%s: %v %v", in, d, err)
		}
	}
	for _, bad := range []any{"P", "PT", "1h", "${ .d }", map[string]any{"weeks": 1}, 5} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// A document whose YAML aliases would expand it past 4 MiB is a problem of
// the document, found before it is expanded; a few aliases are fine.
func TestParseYAMLAliases(t *testing.T) {
	bomb := ctkHead + "do:\n  - set:\n      set:\n        big: &big \"" + strings.Repeat("x", 400_000) + "\"\n        copies: [" + strings.Repeat("*big, ", 1249) + "*big]\n"
	_, err := Parse([]byte(bomb))
	var p *Problems
	if !errors.As(err, &p) || len(p.List) != 1 || p.List[0] != "/: the YAML document is too large: more than 4194304 bytes once its aliases are expanded" {
		t.Errorf("error %v", err)
	}
	ok := ctkHead + "do:\n  - a:\n      set: &v {n: 1}\n  - b:\n      set: *v\n"
	if _, err := Parse([]byte(ok)); err != nil {
		t.Errorf("two aliases: %v", err)
	}
}
