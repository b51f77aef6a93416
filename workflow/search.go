package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/flowd/flowd/workflow/instance"
)

// Search attribute names, kinds and values: see package workflow/instance.
const (
	MaxSearchAttributes = instance.MaxSearchAttributes
	MaxSearchValueBytes = instance.MaxSearchValueBytes
)

// validateSearch checks the search block: at most MaxSearchAttributes,
// each name [a-z][a-z0-9_]{0,62}, each template a string, a number or a
// boolean that references the input only (no step has run when an instance
// is created).
func (d *Definition) validateSearch(ps *problemList) {
	if len(d.Search) > MaxSearchAttributes {
		ps.add("search", fmt.Sprintf("has %d attributes, at most %d", len(d.Search), MaxSearchAttributes))
	}
	for _, name := range slices.Sorted(maps.Keys(d.Search)) {
		path := "search." + name
		if err := instance.ValidateSearchName(name); err != nil {
			ps.add(path, "name must be 1–63 characters: a lowercase letter, then a-z, 0-9 or _")
			continue
		}
		tree := bytes.TrimSpace(d.Search[name])
		if len(tree) == 0 || tree[0] == '{' || tree[0] == '[' || string(tree) == "null" {
			ps.add(path, "must be a string (a template), a number or a boolean")
			continue
		}
		_, err := CompileTemplate(tree, noSteps)
		var te *TemplateError
		switch {
		case errors.As(err, &te):
			for _, p := range te.Problems {
				ps.add(path+p.Path, p.Message)
			}
		case err != nil:
			ps.add(path, err.Error())
		}
	}
}

// SearchTemplates are a definition's search templates compiled, in name
// order: compiled once per definition revision, rendered at every start.
type SearchTemplates struct {
	defName string
	names   []string
	ts      []*Template
	// err is the first template that did not compile (a definition put
	// before its search block was checked): rendering reports it.
	err error
}

// CompileSearch compiles the definition's search templates.
func (d *Definition) CompileSearch() SearchTemplates {
	st := SearchTemplates{defName: d.Name}
	for _, name := range slices.Sorted(maps.Keys(d.Search)) {
		t, err := CompileTemplate(d.Search[name], noSteps)
		if err != nil {
			st.err = fmt.Errorf("%w: %s: %w", ErrInvalidSearch, name, err)
			return st
		}
		st.names, st.ts = append(st.names, name), append(st.ts, t)
	}
	return st
}

// Render renders the attributes from the start's input, each at most max
// bytes while it renders. An attribute whose template references what the
// input does not hold is left out (the instance has no such attribute);
// one that renders to anything but a string, a number or a boolean is an
// error wrapping ErrInvalidSearch.
func (st SearchTemplates) Render(input json.RawMessage, max int) (map[string]json.RawMessage, error) {
	if st.err != nil {
		return nil, st.err
	}
	if len(st.names) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(st.names))
	for i, name := range st.names {
		v, err := st.ts[i].Render(input, nil, max)
		if errors.Is(err, ErrMissingReference) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSearch, name, err)
		}
		if _, _, err := instance.SearchText(name, v); err != nil {
			return nil, fmt.Errorf("search attribute %s of definition %q rendered from the input: %w", name, st.defName, err)
		}
		out[name] = v
	}
	return out, nil
}

// CheckSearch is instance.CheckSearch.
func CheckSearch(attrs map[string]json.RawMessage) ([]instance.SearchValue, error) {
	return instance.CheckSearch(attrs)
}

// ValidateSearchName is instance.ValidateSearchName.
func ValidateSearchName(name string) error { return instance.ValidateSearchName(name) }
