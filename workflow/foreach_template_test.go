package workflow

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestIterationTemplateRendersItemAndIndex(t *testing.T) {
	t.Parallel()
	tmpl, err := CompileIterationTemplate(json.RawMessage(`{"all":"{{ .item }}","name":"{{ .item.name }}","i":"{{ .index }}","text":"#{{ .index }} {{ .item.name }} of {{ .input.n }}"}`), nil)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	got, err := tmpl.RenderIteration(json.RawMessage(`{"n":3}`), nil, &Iteration{Item: json.RawMessage(`{"name":"b.png","w":2}`), Index: 1}, 0)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	want := `{"all":{"name":"b.png","w":2},"name":"b.png","i":1,"text":"#1 b.png of 3"}`
	if string(got) != want {
		t.Errorf("rendered %s, want %s", got, want)
	}
	s, err := mustCompileIterationString(t, "/img/{{ .item.name }}?i={{ .index }}").RenderStringIteration(nil, nil, &Iteration{Item: json.RawMessage(`{"name":"a"}`), Index: 0}, 0)
	if err != nil || s != "/img/a?i=0" {
		t.Errorf("RenderStringIteration = %q, %v; want /img/a?i=0", s, err)
	}
}

func mustCompileIterationString(t *testing.T, s string) *Template {
	t.Helper()
	tmpl, err := CompileIterationStringTemplate(s, nil)
	if err != nil {
		t.Fatalf("compile %q: %v", s, err)
	}
	return tmpl
}

func TestIterationTemplateMissingItemKey(t *testing.T) {
	t.Parallel()
	tmpl, err := CompileIterationTemplate(json.RawMessage(`"{{ .item.name }}"`), nil)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	_, err = tmpl.RenderIteration(nil, nil, &Iteration{Item: json.RawMessage(`"just a string"`)}, 0)
	if !errors.Is(err, ErrMissingReference) || !strings.Contains(err.Error(), `.item is a string, not an object`) {
		t.Errorf("render error = %v, want a missing reference naming .item", err)
	}
	if _, err := tmpl.Render(nil, nil, 0); !errors.Is(err, ErrMissingReference) {
		t.Errorf("render without an iteration: %v, want ErrMissingReference", err)
	}
}

func TestItemOutsideForeachIsRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"{{ .item }}", "{{ .item.name }}", "{{ .index }}"} {
		_, err := CompileTemplate(json.RawMessage(`"`+s+`"`), nil)
		if !errors.Is(err, ErrInvalidTemplate) || !strings.Contains(err.Error(), "only defined in a step with foreach") {
			t.Errorf("CompileTemplate(%s) = %v, want the foreach problem", s, err)
		}
	}
	_, err := CompileIterationTemplate(json.RawMessage(`"{{ .items }}"`), nil)
	if err == nil || !strings.Contains(err.Error(), `unknown root ".items" (want .input, .steps.STEP.output, .item or .index)`) {
		t.Errorf("CompileIterationTemplate(.items) = %v, want an unknown root", err)
	}
}

func TestDefinitionItemOnlyInForeachStep(t *testing.T) {
	t.Parallel()
	bad := "name: x\nsteps:\n  - {id: a, type: task, handler: h, input: {f: '{{ .item.name }}'}}"
	want := []string{`steps[0] (a): input.f: invalid reference "{{ .item.name }}": .item and .index are only defined in a step with foreach`}
	if got := problemsOf(t, bad); !slices.Equal(got, want) {
		t.Errorf("problems:\n  got  %q\n  want %q", got, want)
	}
	good := "name: x\nsteps:\n  - {id: a, type: http, foreach: '.input.urls', request: {method: GET, url: '{{ .item }}', headers: {X-Index: '{{ .index }}'}}}"
	if _, err := ParseDefinition([]byte(good)); err != nil {
		t.Errorf("a foreach step using .item and .index: %v", err)
	}
}
