package ctk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/workflow"
)

// The assertion steps on a finished instance, without running anything:
// each passes on what the kit expects and fails on a near miss.
func TestAssertionSteps(t *testing.T) {
	completed := &run{
		inst: &instance{ID: "w", Status: workflow.StatusCompleted,
			Output: json.RawMessage(`{"colors":["red"],"error":{"instance":"/do/0/a","status":404},"count":1}`)},
		causes: []string{"started", "task /do/0/switchColor completed", "task /do/1/x~1y completed",
			"task /do/2/skip skipped", "task /do/3/setRed completed"},
	}
	faulted := &run{
		inst: &instance{ID: "w", Status: workflow.StatusFailed,
			Error: json.RawMessage(`{"type":"https://example.com/t","status":400,"title":"T","instance":"/do/0/raiseError"}`)},
		causes: []string{"started", "task /do/0/raiseError faulted: T"},
	}
	for _, tc := range []struct {
		run  *run
		text string
		doc  string
		want string // "" passes; else a fragment of the error
	}{
		{completed, "the workflow should complete", "", ""},
		{faulted, "the workflow should complete", "", "want COMPLETED"},
		{completed, "the workflow should complete with output:", "colors: [red]\nerror: {instance: /do/0/a, status: 404}\ncount: 1\n", ""},
		{completed, "the workflow should complete with output:", "colors: [red]\n", "want {\"colors\":[\"red\"]}"},
		{completed, "the workflow output should have properties 'colors', 'error.instance', 'error.status'", "", ""},
		{completed, "the workflow output should have properties 'colors', 'error.title', 'count.x'", "", "output has no error.title, count.x"},
		{completed, "the workflow output should have a 'error.instance' property with value:", "/do/0/a\n", ""},
		{completed, "the workflow output should have a 'count' property with value:", "2\n", "output count is 1, want 2"},
		{completed, "the workflow output should have a 'colors' property containing 1 items", "", ""},
		{completed, "the workflow output should have a 'colors' property containing 2 items", "", "has 1 items, want 2"},
		{completed, "the workflow output should have a 'count' property containing 1 items", "", "not a list"},
		{faulted, "the workflow should fault", "", ""},
		{completed, "the workflow should fault", "", "want FAILED"},
		{faulted, "the workflow should fault with error:", "status: 400\ntype: https://example.com/t\ninstance: /do/0/raiseError\n", ""},
		{faulted, "the workflow should fault with error:", "status: 500\n", `error field "status" is 400, want 500`},
		{faulted, "the workflow should fault with error:", "detail: d\n", `error field "detail" is null, want "d"`},
		{completed, "switchColor should run first", "", ""},
		{completed, "setRed should run first", "", "switchColor ran first, not setRed"},
		{completed, "setRed should run last", "", ""},
		{completed, "skip should run last", "", "setRed ran last, not skip"},
		{completed, "setRed should run after x/y", "", ""},
		{completed, "x/y should run after setRed", "", "x/y ran before setRed"},
		{completed, "setBlue should run after setRed", "", "setBlue never ran"},
		{faulted, "raiseError should run first", "", "no task completion in the history"},
		{&run{}, "the workflow should complete", "", "the workflow was not executed"},
	} {
		def, args := matchStep(tc.text)
		if def == nil {
			t.Errorf("%q: no definition", tc.text)
			continue
		}
		err := def.Do(t.Context(), tc.run, args, tc.doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q %q: %v", tc.text, tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q %q: error %v, want one containing %q", tc.text, tc.doc, err, tc.want)
		}
	}
}

// The arrange steps keep the definition with its document.name and the
// input as JSON; a definition without a name is refused.
func TestArrangeSteps(t *testing.T) {
	r := &run{}
	if err := defineWorkflow(t.Context(), r, nil, "document:\n  dsl: '1.0.3'\n  name: set\ndo: []\n"); err != nil || r.name != "set" {
		t.Errorf("define: %v, name %q", err, r.name)
	}
	if err := defineWorkflow(t.Context(), r, nil, "document: {dsl: '1.0.3'}\n"); err == nil {
		t.Error("a definition without document.name was accepted")
	}
	if err := setInput(t.Context(), r, nil, "user:\n  claims:\n    subject: 6A\npetId: 1\n"); err != nil || string(r.input) != `{"petId":1,"user":{"claims":{"subject":"6A"}}}` {
		t.Errorf("input: %v, %s", err, r.input)
	}
	if err := execute(t.Context(), &run{}, nil, ""); err == nil || !strings.Contains(err.Error(), "no workflow defined") {
		t.Errorf("executing nothing: %v", err)
	}
}
