package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseControlFlowProblems(t *testing.T) {
	t.Parallel()
	const a = "\n  - {id: a, type: task, handler: h}"
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"when does not parse", "name: x\nsteps:\n  - {id: a, type: task, handler: h, when: '.input.x >'}",
			[]string{`steps[0] (a): when: is not a jq program: unexpected EOF`}},
		{"when calls an unknown function", "name: x\nsteps:\n  - {id: a, type: task, handler: h, when: 'nosuch(1)'}",
			[]string{`steps[0] (a): when: does not compile: function not defined: nosuch/1`}},
		{"foreach does not parse", "name: x\nsteps:\n  - {id: a, type: task, handler: h, foreach: '[1,'}",
			[]string{`steps[0] (a): foreach: is not a jq program: unexpected EOF`}},
		{"foreach on a wait step", "name: x\nsteps:\n  - {id: a, type: wait, foreach: '.input'}",
			[]string{`steps[0] (a): foreach: only task, http and workflow steps run for each item`}},
		{"max_concurrency without foreach", "name: x\nsteps:\n  - {id: a, type: task, handler: h, max_concurrency: 2}",
			[]string{`steps[0] (a): max_concurrency: only a step with foreach bounds its iterations`}},
		{"negative max_concurrency", "name: x\nsteps:\n  - {id: a, type: task, handler: h, foreach: '.input', max_concurrency: -1}",
			[]string{`steps[0] (a): max_concurrency: must not be negative`}},
		{"unknown join", "name: x\nsteps:" + a + "\n  - {id: b, type: wait, depends_on: [a], join: some}",
			[]string{`steps[1] (b): join: unknown join "some" (want one of all, any, first)`}},
		{"join without dependencies", "name: x\nsteps:\n  - {id: a, type: wait, join: any}",
			[]string{`steps[0] (a): join: only a step with depends_on joins its dependencies`}},
		{"event on a task step", "name: x\nsteps:\n  - {id: a, type: task, handler: h, event: paid}",
			[]string{`steps[0] (a): event: only wait steps wait for an event`}},
		{"bad event name", "name: x\nsteps:\n  - {id: a, type: wait, event: 'paid now'}",
			[]string{`steps[0] (a): event: "paid now" has a character outside [A-Za-z0-9._:-]`}},
		{"key without event", "name: x\nsteps:\n  - {id: a, type: wait, key: k}",
			[]string{`steps[0] (a): key: only a wait step with an event has a key`}},
		{"key template", "name: x\nsteps:\n  - {id: a, type: wait, event: paid, key: '{{ .nope }}'}",
			[]string{`steps[0] (a): key: invalid reference "{{ .nope }}": unknown root ".nope" (want .input or .steps.STEP.output)`}},
		{"workflow step without definition", "name: x\nsteps:\n  - {id: a, type: workflow}",
			[]string{`steps[0] (a): definition: is required for a workflow step (the name of the child's definition)`}},
		{"definition on a task step", "name: x\nsteps:\n  - {id: a, type: task, handler: h, definition: y}",
			[]string{`steps[0] (a): definition: only workflow steps start a child workflow`}},
		{"output template", "name: x\nsteps:" + a + "\noutput: {total: '{{ .steps.zz.output }}'}",
			[]string{`output.total: invalid reference "{{ .steps.zz.output }}": unknown step "zz"`}},
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

func TestParseControlFlow(t *testing.T) {
	t.Parallel()
	d, err := ParseDefinition([]byte(`
name: order
output: {charged: '{{ .steps.charge.output }}'}
steps:
  - {id: a, type: task, handler: h}
  - {id: charge, type: task, handler: h, depends_on: [a], when: '.input.amount > 100', join: any}
  - {id: each, type: task, handler: h, foreach: '.input.items', max_concurrency: 8}
  - {id: paid, type: wait, event: 'payment.received', key: '{{ .input.id }}'}
  - {id: sub, type: workflow, definition: line, input: {x: 1}, retry: {max_attempts: 2}, timeout: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := d.Step("charge"); s.When != ".input.amount > 100" || s.Join != JoinAny {
		t.Errorf("charge = %+v", s)
	}
	if s, _ := d.Step("each"); s.Foreach != ".input.items" || s.MaxConcurrency != 8 {
		t.Errorf("each = %+v", s)
	}
	if s, _ := d.Step("sub"); s.Type != StepTypeWorkflow || s.Definition != "line" {
		t.Errorf("sub = %+v", s)
	}
	if string(d.Output) != `{"charged":"{{ .steps.charge.output }}"}` {
		t.Errorf("output = %s", d.Output)
	}
}

func TestExprEval(t *testing.T) {
	t.Parallel()
	state := State{
		Variables: map[string]json.RawMessage{"limit": json.RawMessage(`100`)},
		Steps: map[string]*StepState{
			"a": {Status: StepCompleted, Output: json.RawMessage(`{"n":12345678901234567890}`)},
			"b": {Status: StepSkipped},
		},
	}
	d := NewExprDoc(context.Background(), NewDocGate(0))
	defer d.Close()
	doc, err := d.Document(json.RawMessage(`{"amount":150,"items":[1,2]}`), state)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ src, want string }{
		{".input.amount > .variables.limit", "true"},
		{".steps.a.output.n", "12345678901234567890"},
		{".steps.b.status", `"SKIPPED"`},
		{".steps.b.output", "null"},
		{"empty", "null"},
		{".input.items | map(. * 2)", "[2,4]"},
	}
	for _, tc := range cases {
		e, err := CompileExpr(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got, err := e.Eval(context.Background(), doc, ExprBudget{})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s = %s, %v; want %s", tc.src, got, err, tc.want)
		}
	}
	for src, want := range map[string]string{
		`error("boom")`:   "boom",
		`.input.amount.x`: "expected an object but got: number (150)",
		`def f: f + 1; f`: "", // the time or the memory it holds, whichever comes first
		`def f: f; f`:     "took longer than 1s",
	} {
		e, err := CompileExpr(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, err = e.Eval(context.Background(), doc, ExprBudget{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", src, err, want)
		}
	}
	for raw, want := range map[string]bool{"false": false, "null": false, "0": true, `""`: true, "[]": true, "true": true} {
		if Truthy(json.RawMessage(raw)) != want {
			t.Errorf("Truthy(%s) = %v", raw, !want)
		}
	}
}

// TestExprBudget: an expression that would build a value larger than the
// state limit, or hold more than four times it, fails at once with an error
// naming the expression and the limit; so does one a try would catch.
func TestExprBudget(t *testing.T) {
	for _, tc := range []struct {
		src      string
		maxState int
		want     string
	}{
		{`("x"*1e9) as $a | ($a+$a+$a+$a)`, 0,
			`expression "(\"x\"*1e9) as $a | ($a+$a+$a+$a)": ` + "`*`" + ` would build a value of 1000000002 bytes, over --max-state-bytes (4194304 bytes)`},
		{`("x" * 2147483000) | length > 0`, 0,
			`expression "(\"x\" * 2147483000) | length > 0": ` + "`*`" + ` would build a value of 2147483002 bytes, over --max-state-bytes (4194304 bytes)`},
		{`try ("x" * 5000) catch "caught"`, 1000,
			`expression "try (\"x\" * 5000) catch \"caught\"": ` + "`*`" + ` would build a value of 5002 bytes, over --max-state-bytes (1000 bytes)`},
		{`[range(10000)] | map("x"*100000) | length`, 1 << 20,
			`expression "[range(10000)] | map(\"x\"*100000) | length": [...] would build a value larger than --max-state-bytes (1048576 bytes)`},
		{`[range(1e9)] | length`, 1 << 16,
			`expression "[range(1e9)] | length": [...] would make the evaluation hold more than 262144 bytes (4 × --max-state-bytes)`},
		{`def f: [f]; f`, 1 << 16,
			`expression "def f: [f]; f": recursion would make the evaluation hold more than 262144 bytes (4 × --max-state-bytes)`},
	} {
		e, err := CompileExpr(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		start := time.Now()
		_, err = e.Eval(context.Background(), map[string]any{}, ExprBudget{MaxStateBytes: tc.maxState})
		var le *ExprLimitError
		if !errors.As(err, &le) || err.Error() != tc.want {
			t.Errorf("%s: error %v\nwant %s", tc.src, err, tc.want)
		}
		if d := time.Since(start); d >= ExprTimeout {
			t.Errorf("%s: failed after %v, not before the time bound", tc.src, d)
		}
	}
}

// TestExprErrorIsBounded: an error that carries a large value is cut, as
// it is stored in the instance.
func TestExprErrorIsBounded(t *testing.T) {
	e, err := CompileExpr(`error("x" * 100000)`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(context.Background(), nil, ExprBudget{})
	if err == nil || len(err.Error()) > maxExprError+len("…") || !strings.HasPrefix(err.Error(), "error: xxx") {
		t.Errorf("error of %d bytes: %.60v", len(err.Error()), err)
	}
}
