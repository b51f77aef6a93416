package examples

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
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
		if s.Foreach != "" {
			// Rendered per item: its templates must compile as a foreach
			// step's.
			if _, err := workflow.CompileIterationTemplate(s.Input, d.HasStep); err != nil {
				return "", err
			}
			continue
		}
		tmpl, err := workflow.CompileTemplate(s.Input, d.HasStep)
		if err != nil {
			return "", err
		}
		if _, err := tmpl.Render(input, nil, 0); err != nil {
			return "", err
		}
	}
	f.started = append(f.started, def)
	return def, nil
}

func TestSeed(t *testing.T) {
	if len(Files()) != 9 {
		t.Fatalf("embedded examples: %d", len(Files()))
	}
	f := &fakeTarget{defs: map[string]*workflow.Definition{}}
	ids, err := Seed(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(demoStarts) || len(f.defs) != 9 {
		t.Errorf("seeded %v with definitions %v", ids, f.defs)
	}
}

// The newcomer's example is applied by hand, with a worker for its handler:
// seeding it into the demo would leave a step no demo handler runs.
func TestSeedLeavesOutSubfolders(t *testing.T) {
	f := &fakeTarget{defs: map[string]*workflow.Definition{}}
	if _, err := Seed(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.defs["hello"]; ok {
		t.Error("the demo seeds examples/hello")
	}
	for _, file := range Files() {
		if strings.Contains(file.Name, "hello") {
			t.Errorf("embedded: %s", file.Name)
		}
	}
	// The example itself is a valid definition.
	b, err := os.ReadFile("hello/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := workflow.ParseDefinition(b)
	if err != nil || d.Name != "hello" || len(d.Steps) != 1 || d.Steps[0].Handler != "greet" {
		t.Errorf("hello/hello.yaml: %+v, %v", d, err)
	}
}
