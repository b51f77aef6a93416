package ctk

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFeature(t *testing.T) {
	text := `# leading comment
Feature: Things
  As someone
  I want something

  # a comment between scenarios
  Scenario: First
    Given a workflow with definition:
      """yaml
      document:
        name: x
      do: []
      """
    When the workflow is executed
    Then the workflow should complete
    And x should run first

  Scenario: Second
    Given a step
    """
    plain
    """
`
	f, err := parseFeature("things.feature", text)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "Things" || len(f.Scenarios) != 2 {
		t.Fatalf("feature %q with %d scenarios", f.Name, len(f.Scenarios))
	}
	first := f.Scenarios[0]
	if first.Name != "First" || first.Line != 7 || len(first.Steps) != 4 {
		t.Fatalf("first scenario: %+v", first)
	}
	def := first.Steps[0]
	if def.Keyword != "Given" || def.Text != "a workflow with definition:" || def.Line != 8 ||
		!def.HasDoc || def.DocType != "yaml" || def.Doc != "document:\n  name: x\ndo: []\n" {
		t.Errorf("step with a doc string: %+v", def)
	}
	if s := first.Steps[3]; s.Keyword != "And" || s.Text != "x should run first" || s.HasDoc {
		t.Errorf("last step: %+v", s)
	}
	if s := f.Scenarios[1].Steps[0]; s.Doc != "plain\n" || s.DocType != "" {
		t.Errorf("untyped doc string: %+v", s)
	}
}

// A malformed file is an error naming the file and the line.
func TestParseFeatureErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"no feature", "Scenario: x\n  Given y\n", "bad.feature:1: Scenario before the Feature line"},
		{"empty", "# nothing\n", "bad.feature: no Feature line"},
		{"no scenario", "Feature: f\n  text\n", "bad.feature: no Scenario"},
		{"unclosed doc", "Feature: f\nScenario: s\n  Given x:\n  \"\"\"yaml\n  a: 1\n", `bad.feature:4: doc string opened here is never closed with """`},
		{"doc without step", "Feature: f\nScenario: s\n  \"\"\"\n  a\n  \"\"\"\n", "bad.feature:3: a doc string must follow a step"},
		{"two docs", "Feature: f\nScenario: s\n  Given x\n  \"\"\"\n  a\n  \"\"\"\n  \"\"\"\n  b\n  \"\"\"\n", "bad.feature:7: a doc string must follow a step"},
		{"step outside scenario", "Feature: f\nGiven x\n", `bad.feature:2: step "Given x" outside a Scenario`},
		{"unknown keyword", "Feature: f\nScenario: s\n  Given x\nScenario Outline: o\n", `bad.feature:4: unsupported keyword "Scenario Outline"`},
		{"tag", "Feature: f\nScenario: s\n  Given x\n@slow\n", `bad.feature:4: tags and data tables are not supported: "@slow"`},
		{"table", "Feature: f\nScenario: s\n  Given x\n  | a | b |\n", "bad.feature:4: tags and data tables"},
		{"background", "Feature: f\nBackground:\n  Given x\n", `bad.feature:2: unsupported keyword "Background"`},
		{"stray text", "Feature: f\nScenario: s\n  Given x\n  whatever\n", `bad.feature:4: unexpected line "whatever"`},
		{"empty step", "Feature: f\nScenario: s\n  Given\n", "bad.feature:3: Given without a step"},
		{"scenario without steps", "Feature: f\nScenario: s\n", `bad.feature:2: Scenario "s" has no steps`},
		{"second feature", "Feature: f\nFeature: g\n", "bad.feature:2: a second Feature"},
		{"unnamed scenario", "Feature: f\nScenario:\n", "bad.feature:2: Scenario without a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFeature("bad.feature", tc.text)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}

// The kit as shipped parses, and every step phrase it uses has a definition
// that takes a doc string exactly when the step has one.
func TestKitStepsAreDefined(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "features", "*.feature"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 11 {
		t.Errorf("%d feature files, the kit has 11", len(paths))
	}
	scenarios := 0
	for _, p := range paths {
		f, err := readFeature(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range f.Scenarios {
			scenarios++
			for _, s := range sc.Steps {
				def, _ := matchStep(s.Text)
				switch {
				case def == nil:
					t.Errorf("%s:%d: no definition for %q", p, s.Line, s.Text)
				case def.Doc != s.HasDoc:
					t.Errorf("%s:%d: %q: doc string %v, definition takes one: %v", p, s.Line, s.Text, s.HasDoc, def.Doc)
				}
			}
		}
	}
	if scenarios != 21 {
		t.Errorf("%d scenarios, the kit has 21", scenarios)
	}
	if def, _ := matchStep("the workflow should be cancelled"); def != nil {
		t.Errorf("a phrase the kit does not use matched %v", def.Pattern)
	}
}

// A scenario with a phrase no definition knows fails at that step, before
// running anything; so does a step whose doc string does not fit.
func TestUnknownStepFailsTheScenario(t *testing.T) {
	f, err := parseFeature("x.feature", "Feature: f\nScenario: s\n  Given a workflow with definition:\n  \"\"\"yaml\n  document: {name: x}\n  \"\"\"\n  When the workflow is launched\n")
	if err != nil {
		t.Fatal(err)
	}
	err = runScenario(t.Context(), f, f.Scenarios[0], nil)
	if err == nil || err.Error() != `x.feature:7: "When the workflow is launched": no step definition matches this phrase` {
		t.Errorf("unknown step: %v", err)
	}
	f, err = parseFeature("y.feature", "Feature: f\nScenario: s\n  Given a workflow with definition:\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := runScenario(t.Context(), f, f.Scenarios[0], nil); err == nil || !strings.Contains(err.Error(), `y.feature:3: "Given a workflow with definition:": the step needs a doc string`) {
		t.Errorf("missing doc string: %v", err)
	}
}
