package examples

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/flowd/flowd/workflow"
)

type fakeTarget struct {
	defs    map[string]*workflow.Definition
	started []string
}

func (f *fakeTarget) PutDefinition(_ context.Context, body []byte) error {
	d, err := workflow.ParseDefinition(body)
	if err != nil {
		return err
	}
	f.defs[d.Name] = d
	return nil
}

func (f *fakeTarget) Start(_ context.Context, def string, input json.RawMessage) (string, error) {
	d, ok := f.defs[def]
	if !ok {
		return "", errors.New("unknown definition " + def)
	}
	// Every root's input template must render from the demo input.
	for _, id := range d.Roots() {
		s, _ := d.Step(id)
		if len(s.Input) == 0 {
			continue
		}
		tmpl, err := workflow.CompileTemplate(s.Input, d.HasStep)
		if err != nil {
			return "", err
		}
		if _, err := tmpl.Render(input, nil); err != nil {
			return "", err
		}
	}
	f.started = append(f.started, def)
	return def, nil
}

func TestSeed(t *testing.T) {
	if len(Files()) != 3 {
		t.Fatalf("embedded examples: %d", len(Files()))
	}
	f := &fakeTarget{defs: map[string]*workflow.Definition{}}
	ids, err := Seed(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(demoStarts) || len(f.defs) != 3 {
		t.Errorf("seeded %v with definitions %v", ids, f.defs)
	}
}
