package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// knownSteps returns a stepIDs function for CompileTemplate.
func knownSteps(ids ...string) func(string) bool {
	return func(id string) bool { return slices.Contains(ids, id) }
}

func render(t *testing.T, tree, input string, outputs map[string]string) (string, error) {
	t.Helper()
	ids := make([]string, 0, len(outputs))
	raw := make(map[string]json.RawMessage, len(outputs))
	for id, o := range outputs {
		ids = append(ids, id)
		raw[id] = json.RawMessage(o)
	}
	ids = append(ids, "pending") // a step that exists but has not completed
	tpl, err := CompileTemplate(json.RawMessage(tree), knownSteps(ids...))
	if err != nil {
		t.Fatalf("CompileTemplate(%s): %v", tree, err)
	}
	out, err := tpl.Render(json.RawMessage(input), raw, 0)
	if err == nil && !json.Valid(out) {
		t.Fatalf("Render(%s) = %s: not valid JSON", tree, out)
	}
	return string(out), err
}

const tplInput = `{"sku": "A-1", "qty": 2, "big": 9007199254740993, "price": 1.50, "ok": true, "none": null,
	"addr": {"city": "Oslo", "zip": "0150", "lines": ["a", "b"]}, "tags": ["x", "y"], "html": "<a&b>", "empty": ""}`

var tplOutputs = map[string]string{
	"reserve":  `{"id": 42, "items": [{"sku": "A-1"}], "note": "held"}`,
	"fetch.v2": `{"v": 2}`,
	"scalar":   `"just a string"`,
	"nothing":  `null`,
}

func TestRenderTypedSingleReference(t *testing.T) {
	t.Parallel()
	cases := []struct{ tree, want string }{
		{`"{{ .input.sku }}"`, `"A-1"`},
		{`"{{ .input.qty }}"`, `2`},
		{`"{{ .input.big }}"`, `9007199254740993`},
		{`"{{ .input.price }}"`, `1.50`},
		{`"{{ .input.ok }}"`, `true`},
		{`"{{ .input.none }}"`, `null`},
		{`"{{ .input.addr }}"`, `{"city":"Oslo","zip":"0150","lines":["a","b"]}`},
		{`"{{ .input.tags }}"`, `["x","y"]`},
		{`"{{ .input.addr.lines }}"`, `["a","b"]`},
		{`"{{ .input.empty }}"`, `""`},
		{`"{{ .input.html }}"`, `"<a&b>"`},
		{`"{{ .input }}"`, compact(tplInput)},
		{`"{{ .steps.reserve.output }}"`, `{"id":42,"items":[{"sku":"A-1"}],"note":"held"}`},
		{`"{{ .steps.reserve.output.id }}"`, `42`},
		{`"{{ .steps.reserve.output.items }}"`, `[{"sku":"A-1"}]`},
		{`"{{ .steps.scalar.output }}"`, `"just a string"`},
		{`"{{ .steps.nothing.output }}"`, `null`},
		{`"{{ .steps.fetch.v2.output.v }}"`, `2`},
		// Spaces inside the braces are optional, and may be tabs.
		{`"{{.input.qty}}"`, `2`},
		{`"{{   .input.qty }}"`, `2`},
		{`"{{ .input.qty\t}}"`, `2`},
		{`"{{\t.input.qty }}"`, `2`},
		{`"{{.steps.reserve.output.id   }}"`, `42`},
	}
	for _, tc := range cases {
		got, err := render(t, tc.tree, tplInput, tplOutputs)
		if err != nil || got != tc.want {
			t.Errorf("render %s = %s, %v; want %s", tc.tree, got, err, tc.want)
		}
	}
}

func TestRenderMixedString(t *testing.T) {
	t.Parallel()
	cases := []struct{ tree, want string }{
		{`"sku-{{ .input.sku }}"`, `"sku-A-1"`},
		{`"{{ .input.sku }}-{{ .input.qty }}"`, `"A-1-2"`},
		{`"n={{ .input.big }}"`, `"n=9007199254740993"`},
		{`"p={{ .input.price }}"`, `"p=1.50"`},
		{`"ok={{ .input.ok }}, none={{ .input.none }}"`, `"ok=true, none=null"`},
		{`"addr={{ .input.addr }}"`, `"addr={\"city\":\"Oslo\",\"zip\":\"0150\",\"lines\":[\"a\",\"b\"]}"`},
		{`"tags: {{.input.tags}}"`, `"tags: [\"x\",\"y\"]"`},
		{`"[{{ .input.empty }}]"`, `"[]"`},
		{`"{{ .input.html }} & more"`, `"<a&b> & more"`},
		{`"order {{ .steps.reserve.output.id }}: {{ .steps.reserve.output.note }}"`, `"order 42: held"`},
		{`"{{ .steps.scalar.output }}!"`, `"just a string!"`},
		// A space outside the braces makes it a text string.
		{`" {{ .input.qty }}"`, `" 2"`},
		{`"{{ .input.qty }} "`, `"2 "`},
		{`"{{ .input.qty }}{{ .input.qty }}"`, `"22"`},
		// Braces that open no reference are text.
		{`"a }} b { c"`, `"a }} b { c"`},
		{`"{{ .input.sku }}}}"`, `"A-1}}"`},
		{`"{ {{ .input.qty }} }"`, `"{ 2 }"`},
		// Newlines and quotes in the referenced value are escaped once.
		{`"say {{ .steps.q.output }}"`, `"say \"hi\"\n"`},
	}
	outputs := map[string]string{"q": `"\"hi\"\n"`}
	for k, v := range tplOutputs {
		outputs[k] = v
	}
	for _, tc := range cases {
		got, err := render(t, tc.tree, tplInput, outputs)
		if err != nil || got != tc.want {
			t.Errorf("render %s = %s, %v; want %s", tc.tree, got, err, tc.want)
		}
	}
}

func TestRenderTree(t *testing.T) {
	t.Parallel()
	tree := `{
		"sku": "{{ .input.sku }}",
		"qty": "{{ .input.qty }}",
		"lines": [{"text": "x{{ .input.addr.city }}", "n": 1.0}, [true, null, "{{ .input.big }}"], 12345678901234567890, -0.0e+5],
		"nested": {"deeper": {"id": "{{ .steps.reserve.output.id }}", "plain": "no refs"}},
		"{{ .input.sku }}": "keys are not templated",
		"empty": {}, "none": [], "unicode": "é\u00e9\u2028"
	}`
	got, err := render(t, tree, tplInput, tplOutputs)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"sku":"A-1","qty":2,"lines":[{"text":"xOslo","n":1.0},[true,null,9007199254740993],12345678901234567890,-0.0e+5],` +
		`"nested":{"deeper":{"id":42,"plain":"no refs"}},"{{ .input.sku }}":"keys are not templated",` +
		`"empty":{},"none":[],"unicode":"éé\u2028"}`
	if got != want {
		t.Errorf("render:\n got %s\nwant %s", got, want)
	}
}

func TestRenderWithoutReferencesKeepsTheValue(t *testing.T) {
	t.Parallel()
	for _, tree := range []string{`"plain"`, `"a }} b"`, `"\u00e9\n\"q\""`, `12345678901234567890123`, `1.50`, `-0`, `1E+2`,
		`true`, `null`, `[]`, `{}`, `{"a":[1,{"b":"c"}],"<":"&"}`} {
		got, err := render(t, tree, `{}`, nil)
		if err != nil || !sameJSON(t, got, tree) {
			t.Errorf("render %s = %s, %v", tree, got, err)
		}
		if !bytes.Contains([]byte(tree), []byte(`\`)) && got != compact(tree) {
			t.Errorf("render %s = %s, want it unchanged", tree, got)
		}
	}
	// An empty tree renders null.
	for _, tree := range []string{"", "  "} {
		tpl, err := CompileTemplate(json.RawMessage(tree), nil)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := tpl.Render(nil, nil, 0); err != nil || string(out) != "null" {
			t.Errorf("empty template renders %s, %v", out, err)
		}
	}
}

func TestRenderMissingReferences(t *testing.T) {
	t.Parallel()
	cases := []struct{ tree, input, want string }{
		{`"{{ .input.sku }}"`, `{"id": 1}`, `missing reference {{ .input.sku }}: key "sku" not found`},
		{`{"a": ["x-{{ .input.sku }}"]}`, `{}`, `missing reference {{ .input.sku }}: key "sku" not found`},
		{`"{{ .input.sku }}"`, ``, `missing reference {{ .input.sku }}: key "sku" not found`},
		{`"{{.input.addr.zip}}"`, `{"addr": {}}`, `missing reference {{ .input.addr.zip }}: key "zip" not found in .input.addr`},
		{`"{{ .input.addr.zip }}"`, `{"addr": "Oslo"}`, `missing reference {{ .input.addr.zip }}: .input.addr is a string, not an object`},
		{`"{{ .input.addr.zip }}"`, `{"addr": null}`, `missing reference {{ .input.addr.zip }}: .input.addr is null, not an object`},
		{`"{{ .input.tags.0 }}"`, `{"tags": ["x"]}`, `missing reference {{ .input.tags.0 }}: .input.tags is a list, not an object`},
		{`"{{ .input.k }}"`, `[1]`, `missing reference {{ .input.k }}: .input is a list, not an object`},
		{`"{{ .input.k }}"`, `7`, `missing reference {{ .input.k }}: .input is 7, not an object`},
		{`"{{ .steps.pending.output }}"`, `{}`, `missing reference {{ .steps.pending.output }}: step "pending" has no output (it has not completed)`},
		{`"id {{ .steps.pending.output.id }}"`, `{}`, `missing reference {{ .steps.pending.output.id }}: step "pending" has no output (it has not completed)`},
		{`"{{ .steps.reserve.output.missing }}"`, `{}`, `missing reference {{ .steps.reserve.output.missing }}: key "missing" not found`},
		{`"{{ .steps.reserve.output.items.sku }}"`, `{}`, `missing reference {{ .steps.reserve.output.items.sku }}: .steps.reserve.output.items is a list, not an object`},
		{`"{{ .steps.nothing.output.k }}"`, `{}`, `missing reference {{ .steps.nothing.output.k }}: .steps.nothing.output is null, not an object`},
	}
	for _, tc := range cases {
		_, err := render(t, tc.tree, tc.input, tplOutputs)
		if !errors.Is(err, ErrMissingReference) || err.Error() != tc.want {
			t.Errorf("render %s with %s: error %v, want %q", tc.tree, tc.input, err, tc.want)
		}
	}
	// An output that is not JSON is an error, but not a missing reference.
	tpl, _ := CompileTemplate(json.RawMessage(`"{{ .steps.x.output }}"`), nil)
	if _, err := tpl.Render(nil, map[string]json.RawMessage{"x": json.RawMessage(`{bad`)}, 0); err == nil || errors.Is(err, ErrMissingReference) {
		t.Errorf("invalid output: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ tree, want string }{
		{`"{{ input }}"`, `invalid reference "{{ input }}": a reference starts with a dot: .input… or .steps.STEP.output…`},
		{`"{{ .foo }}"`, `invalid reference "{{ .foo }}": unknown root ".foo" (want .input or .steps.STEP.output)`},
		{`"{{ .Input }}"`, `invalid reference "{{ .Input }}": unknown root ".Input" (want .input or .steps.STEP.output)`},
		{`"{{ .inputs }}"`, `invalid reference "{{ .inputs }}": unknown root ".inputs" (want .input or .steps.STEP.output)`},
		{`"{{ . }}"`, `invalid reference "{{ . }}": unknown root "." (want .input or .steps.STEP.output)`},
		{`"{{ .steps.x }}"`, `invalid reference "{{ .steps.x }}": want .steps.STEP.output: no ".output" after the step id`},
		{`"{{ .steps }}"`, `invalid reference "{{ .steps }}": want .steps.STEP.output`},
		{`"{{ .steps.x.outputs }}"`, `invalid reference "{{ .steps.x.outputs }}": want .steps.STEP.output: no ".output" after the step id`},
		{`"{{ .steps..output }}"`, `invalid reference "{{ .steps..output }}": step id is empty`},
		{`"{{ .steps.a b.output }}"`, `invalid reference "{{ .steps.a b.output }}": step id "a b" has character ' ' at offset 1 (allowed: A-Za-z0-9_.-)`},
		{`"{{ .steps.nope.output }}"`, `invalid reference "{{ .steps.nope.output }}": unknown step "nope"`},
		{`"{{ .input }"`, `unterminated "{{" at offset 0 (no closing "}}")`},
		{`"abc {{ .input"`, `unterminated "{{" at offset 4 (no closing "}}")`},
		{`"{{"`, `unterminated "{{" at offset 0 (no closing "}}")`},
		{`"{{}}"`, `invalid reference "{{}}": empty reference`},
		{`"{{   }}"`, `invalid reference "{{   }}": empty reference`},
		{`"{{ .input. }}"`, `invalid reference "{{ .input. }}": empty key (two dots in a row or a trailing dot)`},
		{`"{{ .input..a }}"`, `invalid reference "{{ .input..a }}": empty key (two dots in a row or a trailing dot)`},
		{`"{{ .input.a b }}"`, `invalid reference "{{ .input.a b }}": key "a b" has character ' ' (keys are [A-Za-z0-9_-])`},
		{`"{{ .input.a.b.c | upper }}"`, `invalid reference "{{ .input.a.b.c | upper }}": key "c | upper" has character ' ' (keys are [A-Za-z0-9_-])`},
		{`"{{ .input.é }}"`, `invalid reference "{{ .input.é }}": key "é" has character 'é' (keys are [A-Za-z0-9_-])`},
		{`"{{ .input[0] }}"`, `invalid reference "{{ .input[0] }}": unknown root ".input[0]" (want .input or .steps.STEP.output)`},
		{`"{{ .steps.reserve.output.k. }}"`, `invalid reference "{{ .steps.reserve.output.k. }}": empty key (two dots in a row or a trailing dot)`},
		{`"{{ {{ .input }} }}"`, `invalid reference "{{ {{ .input }}": a reference starts with a dot: .input… or .steps.STEP.output…`},
		{`{"a": 1, "a": 2}`, `a: duplicate key "a"`},
		{`{"a": `, `not valid JSON`},
		{`{"a": 1} x`, `not valid JSON`},
	}
	for _, tc := range cases {
		_, err := CompileTemplate(json.RawMessage(tc.tree), knownSteps("reserve"))
		var te *TemplateError
		if !errors.As(err, &te) || !errors.Is(err, ErrInvalidTemplate) {
			t.Errorf("compile %s: error %v, want a *TemplateError", tc.tree, err)
			continue
		}
		if got := strings.TrimPrefix(err.Error(), "invalid template: "); got != tc.want {
			t.Errorf("compile %s:\n got %s\nwant %s", tc.tree, got, tc.want)
		}
	}
}

func TestCompileListsEveryProblemWithItsPath(t *testing.T) {
	t.Parallel()
	_, err := CompileTemplate(json.RawMessage(`{"a": "{{ .foo }}", "b": [1, {"c": "x {{ input }} y {{ .bar }}"}], "d e": "{{"}`), nil)
	var te *TemplateError
	if !errors.As(err, &te) {
		t.Fatalf("error %v", err)
	}
	want := []TemplateProblem{
		{".a", `invalid reference "{{ .foo }}": unknown root ".foo" (want .input or .steps.STEP.output)`},
		{".b[1].c", `invalid reference "{{ input }}": a reference starts with a dot: .input… or .steps.STEP.output…`},
		{".b[1].c", `invalid reference "{{ .bar }}": unknown root ".bar" (want .input or .steps.STEP.output)`},
		{`["d e"]`, `unterminated "{{" at offset 0 (no closing "}}")`},
	}
	if !slices.Equal(te.Problems, want) {
		t.Errorf("problems:\n got %q\nwant %q", te.Problems, want)
	}
}

// TestDottedStepIDs pins the rule for step ids with dots: the split at
// ".output" whose step id is a known step wins.
func TestDottedStepIDs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ids      []string // nil: no step list
		ref      string
		wantStep string
		wantKeys []string
		wantErr  string
	}{
		{[]string{"a.b"}, ".steps.a.b.output.c", "a.b", []string{"c"}, ""},
		{[]string{"a", "a.b"}, ".steps.a.b.output", "a.b", nil, ""},
		{[]string{"a"}, ".steps.a.output.b.output", "a", []string{"b", "output"}, ""},
		{[]string{"x.output"}, ".steps.x.output.output.k", "x.output", []string{"k"}, ""},
		{[]string{"x"}, ".steps.x.output.output.k", "x", []string{"output", "k"}, ""},
		{[]string{"a."}, ".steps.a..output", "a.", nil, ""},
		{[]string{"a"}, ".steps.a.b.output", "", nil, `unknown step "a.b"`},
		{[]string{"a", "a.output.b"}, ".steps.a.output.b.output", "", nil, `ambiguous: it could name step "a" or step "a.output.b"`},
		{nil, ".steps.a.b.output.c", "a.b", []string{"c"}, ""},
		{nil, ".steps.a.output.b.output", "a", []string{"b", "output"}, ""},
	}
	for _, tc := range cases {
		var ids func(string) bool
		if tc.ids != nil {
			ids = knownSteps(tc.ids...)
		}
		tpl, err := CompileStringTemplate("{{ "+tc.ref+" }}", ids)
		if tc.wantErr != "" {
			if err == nil || !strings.HasSuffix(err.Error(), tc.wantErr) {
				t.Errorf("%v %s: error %v, want %q", tc.ids, tc.ref, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v %s: %v", tc.ids, tc.ref, err)
			continue
		}
		refs := tpl.References()
		if len(refs) != 1 || refs[0].Step != tc.wantStep || !slices.Equal(refs[0].Keys, tc.wantKeys) {
			t.Errorf("%v %s: references %+v, want step %q keys %q", tc.ids, tc.ref, refs, tc.wantStep, tc.wantKeys)
		}
	}
}

func TestReferences(t *testing.T) {
	t.Parallel()
	tpl, err := CompileTemplate(json.RawMessage(`{"a": "{{ .input }}", "b": ["x {{.steps.s.output.k1.k2}} {{ .input.q }}"]}`), knownSteps("s"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Reference{
		{Path: ".a"},
		{Path: ".b[0]", Step: "s", Keys: []string{"k1", "k2"}},
		{Path: ".b[0]", Keys: []string{"q"}},
	}
	got := tpl.References()
	if len(got) != len(want) {
		t.Fatalf("References = %+v", got)
	}
	for i := range want {
		if got[i].Path != want[i].Path || got[i].Step != want[i].Step || !slices.Equal(got[i].Keys, want[i].Keys) {
			t.Errorf("References[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := got[1].String(); s != "{{ .steps.s.output.k1.k2 }}" {
		t.Errorf("String = %s", s)
	}
	got[1].Keys[0] = "changed"
	if tpl.References()[1].Keys[0] != "k1" {
		t.Error("References shares memory with the template")
	}
}

func TestRenderString(t *testing.T) {
	t.Parallel()
	outputs := map[string]json.RawMessage{"s": json.RawMessage(`{"id": 7, "name": "x y"}`)}
	cases := []struct{ tpl, want string }{
		{"http://127.0.0.1:9000/hook", "http://127.0.0.1:9000/hook"},
		{"http://h/orders/{{ .steps.s.output.id }}", "http://h/orders/7"},
		{"{{ .steps.s.output.id }}", "7"},
		{"{{ .steps.s.output.name }}", "x y"},
		{"{{ .steps.s.output }}", `{"id":7,"name":"x y"}`},
		{"Bearer {{ .input.token }}", "Bearer t0k"},
	}
	for _, tc := range cases {
		tpl, err := CompileStringTemplate(tc.tpl, knownSteps("s"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.RenderString(json.RawMessage(`{"token": "t0k"}`), outputs, 0)
		if err != nil || got != tc.want {
			t.Errorf("RenderString %q = %q, %v; want %q", tc.tpl, got, err, tc.want)
		}
	}
	tpl, _ := CompileStringTemplate("x{{ .input.nope }}", nil)
	if _, err := tpl.RenderString(nil, nil, 0); !errors.Is(err, ErrMissingReference) {
		t.Errorf("missing reference in a string: %v", err)
	}
	obj, _ := CompileTemplate(json.RawMessage(`{"a": 1}`), nil)
	if _, err := obj.RenderString(nil, nil, 0); err == nil {
		t.Error("RenderString of an object must fail")
	}
	if _, err := CompileStringTemplate("{{ .bad }}", nil); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("CompileStringTemplate: %v", err)
	}
}

func TestStepOutputs(t *testing.T) {
	t.Parallel()
	st, err := ParseState([]byte(`{"steps": {"a": {"status": "COMPLETED", "output": {"k": 1}}, "b": {"status": "RUNNING"},
		"c": {"status": "FAILED", "output": 1}, "d": {"status": "COMPLETED"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := StepOutputs(st.Steps)
	// Raw values are kept compact (State.UnmarshalJSON).
	if len(got) != 2 || string(got["a"]) != `{"k":1}` || string(got["d"]) != "null" {
		t.Errorf("StepOutputs = %s", got)
	}
}

func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.String()
}

// sameJSON compares two JSON texts by value, numbers by their text.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	ca, err1 := canonicalJSON(json.RawMessage(a))
	cb, err2 := canonicalJSON(json.RawMessage(b))
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

func FuzzTemplate(f *testing.F) {
	f.Add(`{"a": "{{ .input.x }}", "b": ["n={{ .steps.s.output.k }}", 1.50, null]}`, `{"x": {"y": [1, 2]}}`, `{"k": 9007199254740993}`)
	f.Add(`"{{ .steps.a.b.output }}"`, `{}`, `"str"`)
	f.Add(`"{{.input}}{{.input}}"`, `"\u2028<&>"`, `null`)
	f.Add(`"{{ .steps.s.output.k.j }}"`, `{}`, `{"k": [1]}`)
	f.Add(`"{{ .input"`, `{}`, `{}`)
	f.Add(`{"{{ .input }}": "{{ }}"}`, `{}`, `{}`)
	f.Add(`"x {{ .input.a }} y"`, `{"a": "\ud800"}`, `{}`)
	f.Add(`12345678901234567890e-400`, ``, ``)
	f.Add(`"{{ .steps.s.output }}"`, `{}`, `{bad json`)
	f.Fuzz(func(t *testing.T, tree, input, output string) {
		outputs := map[string]json.RawMessage{"s": json.RawMessage(output), "a.b": json.RawMessage(output)}
		tpl, err := CompileTemplate(json.RawMessage(tree), knownSteps("s", "a.b", "a"))
		if err != nil {
			if !errors.Is(err, ErrInvalidTemplate) {
				t.Fatalf("compile error %v is not ErrInvalidTemplate", err)
			}
		} else {
			out, err := tpl.Render(json.RawMessage(input), outputs, 0)
			if err == nil {
				if !json.Valid(out) {
					t.Fatalf("Render = %s: not valid JSON", out)
				}
				if len(tpl.References()) == 0 && len(bytes.TrimSpace([]byte(tree))) > 0 {
					ct, _ := canonicalJSON(json.RawMessage(tree))
					co, _ := canonicalJSON(out)
					if !bytes.Equal(ct, co) {
						t.Fatalf("a template without references changed: %s → %s", tree, out)
					}
				}
				again, err := tpl.Render(json.RawMessage(input), outputs, 0)
				if err != nil || !bytes.Equal(again, out) {
					t.Fatalf("Render is not deterministic: %s, %s, %v", out, again, err)
				}
			}
			_, _ = tpl.RenderString(json.RawMessage(input), outputs, 0)
		}
		// The same text as a string template (a URL, a header value).
		if st, err := CompileStringTemplate(tree, nil); err == nil {
			if _, err := st.RenderString(json.RawMessage(input), outputs, 0); err == nil {
				if _, err := st.Render(json.RawMessage(input), outputs, 0); err != nil && errors.Is(err, ErrMissingReference) {
					t.Fatalf("RenderString found every reference but Render did not: %v", err)
				}
			}
		} else if !errors.Is(err, ErrInvalidTemplate) {
			t.Fatalf("compile error %v is not ErrInvalidTemplate", err)
		}
	})
}
