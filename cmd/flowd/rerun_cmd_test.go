package main

import (
	"encoding/json"
	"testing"

	"github.com/flowd/flowd/api"
)

// flowd rerun starts a re-run of a finished workflow from a step and
// prints it as start does; flowd get shows the links both ways; every
// mistake has its exit code and a message that says what to do.
func TestCLIRerun(t *testing.T) {
	t.Parallel()
	b := setupCLIEngine(t)
	ctx := t.Context()
	def := `name: review
steps:
  - {id: draft, type: wait}
  - {id: approve, type: wait, depends_on: [draft]}
`
	if _, _, err := b.client.PutDefinition(ctx, "review", []byte(def)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "rv-1", Definition: "review"}); err != nil {
		t.Fatal(err)
	}
	for v, step := range []string{"draft", "approve"} {
		if _, err := b.client.CompleteStepAt(ctx, "rv-1", step, int64(v), json.RawMessage(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitForVersion(t, b, "rv-1", 2)

	b.golden("rerun", 0, "", "rerun", "rv-1", "--from", "approve", "--id", "rv-2")
	b.golden("rerun-get-original", 0, "", "get", "rv-1")
	b.golden("rerun-get-rerun", 0, "", "get", "rv-2")
	b.golden("rerun-still-running", exitError, "", "rerun", "rv-2", "--from", "draft")
	b.golden("rerun-unknown-step", exitError, "", "rerun", "rv-1", "--from", "publish")
	b.golden("rerun-unknown-workflow", exitNotFound, "", "rerun", "rv-9", "--from", "draft")
	b.golden("rerun-no-from", exitUsage, "", "rerun", "rv-1")
	b.golden("rerun-both-froms", exitUsage, "", "rerun", "rv-1", "--from", "draft", "--from-seq", "2")
	b.golden("rerun-bad-seq", exitUsage, "", "rerun", "rv-1", "--from-seq", "0")
	if res := b.run("", nil, "rerun", "rv-1", "--from", "draft", "-o", "json"); res.code != 0 {
		t.Errorf("rerun -o json: %+v", res)
	} else {
		var inst struct {
			RerunOf string `json:"rerun_of"`
			Status  string `json:"status"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &inst); err != nil || inst.RerunOf != "rv-1" || inst.Status != "RUNNING" {
			t.Errorf("rerun -o json printed %s (%v)", res.stdout, err)
		}
	}
}
