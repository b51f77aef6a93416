package main

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/client"
)

// start names the definition it starts: one the server does not have is
// "not found" (exit 4) saying where to look; an instance without a
// definition, which never runs, takes --free-form.
func TestStartNeedsADefinitionOrFreeForm(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.golden("start-unknown-definition", exitNotFound, "", "start", "no-such-definition")
	b.golden("start-no-definition", exitUsage, "", "start", "--id", "inv-1", "--state", `{"variables":{"total":1}}`)
	b.golden("start-free-form-and-definition", exitUsage, "", "start", "order", "--free-form")
	if page, err := b.client.ListWorkflows(t.Context(), client.ListOptions{}); err != nil || len(page.Workflows) != 0 {
		t.Fatalf("the refused starts created %+v (%v)", page, err)
	}
	res := b.run("", nil, "start", "--free-form", "--id", "inv-1")
	if res.code != 0 || !strings.Contains(res.stdout, "workflow inv-1 created: PENDING, version 0") {
		t.Errorf("start --free-form: %+v", res)
	}
}
