package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A definition's search block is checked with the other problems: names,
// kinds of template, references (the input only), how many.
func TestSearchValidation(t *testing.T) {
	var many strings.Builder
	for i := range 17 {
		fmt.Fprintf(&many, "a%d: 1, ", i)
	}
	for _, c := range []struct {
		search string
		want   []string // problem paths, "" for none
	}{
		{`{customer: '{{ .input.customer }}', tier: 1, vip: true, kind: order, label: 'c-{{ .input.id }}'}`, nil},
		{`{Customer: x}`, []string{"search.Customer"}},
		{`{a-b: x}`, []string{"search.a-b"}},
		{`{a: {x: 1}}`, []string{"search.a"}},
		{`{a: [1]}`, []string{"search.a"}},
		{`{a: null}`, []string{"search.a"}},
		{`{a: '{{ .steps.s.output }}'}`, []string{"search.a"}},
		{`{a: '{{ .input. }}'}`, []string{"search.a"}},
		{"{" + many.String() + "}", []string{"search: has 17 attributes"}},
	} {
		_, err := ParseDefinition([]byte("name: d\nsearch: " + c.search + "\nsteps:\n  - {id: s, type: wait}\n"))
		if c.want == nil {
			if err != nil {
				t.Errorf("search %s: %v", c.search, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidDefinition) {
			t.Errorf("search %s: %v, want ErrInvalidDefinition", c.search, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("search %s: %v does not name %s", c.search, err, w)
			}
		}
	}
	// A code definition declares them too.
	if _, err := ParseDefinition([]byte("name: c\nsearch: {Bad: 1}\ncode: {handler: h}\n")); err == nil || !strings.Contains(err.Error(), "search.Bad") {
		t.Errorf("code definition with a bad name: %v", err)
	}
}

// SearchTemplates.Render renders each attribute from the input with its type, leaves
// out one whose reference the input does not hold, and refuses a value
// that is no string, number or boolean.
func TestRenderSearch(t *testing.T) {
	d, err := ParseDefinition([]byte("name: d\nsearch: {customer: '{{ .input.customer }}', amount: '{{ .input.amount }}', kind: order, n: 3, label: 'c-{{ .input.amount }}', region: '{{ .input.region }}'}\nsteps:\n  - {id: s, type: wait}\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := d.CompileSearch()
	got, err := st.Render(json.RawMessage(`{"customer":"acme","amount":42.5}`), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if string(b) != `{"amount":42.5,"customer":"acme","kind":"order","label":"c-42.5","n":3}` {
		t.Errorf("Render = %s", b)
	}
	for _, input := range []string{`{"customer":{"x":1}}`, `{"customer":[1]}`, `{"customer":null}`, `{"customer":"` + strings.Repeat("x", 513) + `"}`} {
		if _, err := st.Render(json.RawMessage(input), 1<<20); !errors.Is(err, ErrInvalidSearch) || !strings.Contains(err.Error(), "customer") {
			t.Errorf("Render(%.40s) = %v, want ErrInvalidSearch naming customer", input, err)
		}
	}
}

// A start renders its definition's search templates compiled once per
// revision (the engine keeps SearchTemplates with the compiled definition)
// rather than compiling them for each start.
func BenchmarkSearchRender(b *testing.B) {
	d, err := ParseDefinition([]byte("name: d\nsearch: {customer: '{{ .input.customer }}', amount: '{{ .input.amount }}', kind: order, label: 'c-{{ .input.amount }}'}\nsteps:\n  - {id: s, type: wait}\n"))
	if err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"customer":"acme","amount":42.5}`)
	b.Run("compiled once", func(b *testing.B) {
		st := d.CompileSearch()
		for b.Loop() {
			if _, err := st.Render(input, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compiled per start", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.CompileSearch().Render(input, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}
