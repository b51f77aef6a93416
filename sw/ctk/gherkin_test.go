package ctk

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// The CTK is written in a small subset of Gherkin: one Feature with a free
// description, Scenarios made of steps (Given, When, Then, And, But), doc
// strings between """ lines (with an optional content type such as yaml) and
// # comments. featureFile reads exactly that subset and refuses anything else
// with the line it stopped at, so a kit update that uses more of Gherkin fails
// loudly instead of silently losing a step.

// feature is a parsed .feature file.
type feature struct {
	Name      string
	Path      string
	Scenarios []*scenario
}

// scenario is one Scenario with its steps, in order.
type scenario struct {
	Name  string
	Line  int
	Steps []*step
}

// step is one step: Keyword is Given, When, Then, And or But; Text is the
// rest of the line; Doc is its doc string ("" when it has none) and DocType
// the doc string's content type ("yaml" for """yaml).
type step struct {
	Keyword string
	Text    string
	Line    int
	Doc     string
	DocType string
	HasDoc  bool
}

// stepKeywords are the keywords a step line starts with.
var stepKeywords = []string{"Given", "When", "Then", "And", "But"}

// unsupportedKeywords are the other Gherkin keywords: a file using one is
// refused rather than misread.
var unsupportedKeywords = []string{"Background", "Scenario Outline", "Scenario Template", "Examples", "Scenarios", "Example", "Rule"}

// readFeature reads and parses the feature file at path.
func readFeature(path string) (*feature, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseFeature(path, string(data))
}

// parseFeature parses the text of a feature file; name is used in errors,
// which read "name:LINE: what".
func parseFeature(name, text string) (*feature, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	f := &feature{Path: name}
	var cur *scenario
	var last *step
	fail := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...))
	}
	for i := 0; i < len(lines); i++ {
		n := i + 1
		line := strings.TrimSpace(lines[i])
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, `"""`):
			if last == nil || last.HasDoc {
				return nil, fail(n, "a doc string must follow a step (and only one per step)")
			}
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " \t"))
			docType := strings.TrimSpace(strings.TrimPrefix(line, `"""`))
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(lines[i]) == `"""` {
					closed = true
					break
				}
				body = append(body, dedent(lines[i], indent))
			}
			if !closed {
				return nil, fail(n, `doc string opened here is never closed with """`)
			}
			last.Doc, last.DocType, last.HasDoc = strings.Join(body, "\n")+"\n", docType, true
			continue
		}
		if kw, _, ok := strings.Cut(line, ":"); ok && slices.Contains(unsupportedKeywords, kw) {
			return nil, fail(n, "unsupported keyword %q (this reader knows Feature, Scenario and the steps %s)", kw, strings.Join(stepKeywords, ", "))
		}
		switch line[0] {
		case '@', '|':
			return nil, fail(n, "tags and data tables are not supported: %q", line)
		}
		keyword, rest, _ := strings.Cut(line, " ")
		switch {
		case strings.HasSuffix(keyword, ":"):
			title := strings.TrimSpace(strings.TrimPrefix(line, keyword))
			switch keyword {
			case "Feature:":
				if f.Name != "" {
					return nil, fail(n, "a second Feature (one per file)")
				}
				if title == "" {
					return nil, fail(n, "Feature without a name")
				}
				f.Name = title
			case "Scenario:":
				if f.Name == "" {
					return nil, fail(n, "Scenario before the Feature line")
				}
				if title == "" {
					return nil, fail(n, "Scenario without a name")
				}
				cur = &scenario{Name: title, Line: n}
				f.Scenarios = append(f.Scenarios, cur)
				last = nil
			default:
				return nil, fail(n, "unexpected line %q", line)
			}
		case slices.Contains(stepKeywords, keyword):
			if cur == nil {
				return nil, fail(n, "step %q outside a Scenario", line)
			}
			if strings.TrimSpace(rest) == "" {
				return nil, fail(n, "%s without a step", keyword)
			}
			last = &step{Keyword: keyword, Text: strings.TrimSpace(rest), Line: n}
			cur.Steps = append(cur.Steps, last)
		case cur == nil && f.Name != "":
			// Free description between the Feature line and the first Scenario.
		default:
			return nil, fail(n, "unexpected line %q", line)
		}
	}
	switch {
	case f.Name == "":
		return nil, fmt.Errorf("%s: no Feature line", name)
	case len(f.Scenarios) == 0:
		return nil, fmt.Errorf("%s: no Scenario", name)
	}
	for _, s := range f.Scenarios {
		if len(s.Steps) == 0 {
			return nil, fail(s.Line, "Scenario %q has no steps", s.Name)
		}
	}
	return f, nil
}

// dedent removes up to indent leading blanks: a doc string's lines are
// indented relative to its opening """.
func dedent(line string, indent int) string {
	for k := 0; k < indent && len(line) > 0 && (line[0] == ' ' || line[0] == '\t'); k++ {
		line = line[1:]
	}
	return line
}
