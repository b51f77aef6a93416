package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// flowd diff shows every value that changed between two versions, by its
// path; -o json gives the changes as a JSON Patch with the old values. An
// unknown workflow and a version it does not have exit 4, bad arguments 2.
func TestCLIDiff(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := t.Context()
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "order-1", Input: json.RawMessage(`{"sku":"A-1"}`),
		State: json.RawMessage(`{"variables":{"counter":1,"note":"fragile","a/b~c":[1,2]},"steps":{"approve":{"status":"WAITING"}}}`)}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(1500 * time.Millisecond)
	long := strings.Repeat("the customer asked for a gift wrap and a card; ", 3)
	if _, err := b.client.PatchWorkflow(ctx, "order-1", "*", json.RawMessage(`{"variables":{"counter":2,"note":null,"a/b~c":[1,2,3],"wrap":"`+long+`"},"region":"eu"}`)); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if _, err := b.client.CompleteStep(ctx, "order-1", "approve", "*", json.RawMessage(`{"by":"ana"}`)); err != nil {
		t.Fatal(err)
	}
	b.golden("diff", 0, "", "diff", "order-1", "0", "2")
	b.golden("diff-same", 0, "", "diff", "order-1", "1", "1")
	res := b.golden("diff-json", 0, "", "diff", "order-1", "0", "2", "-o", "json")
	var out struct {
		WorkflowID string `json:"workflow_id"`
		From, To   struct{ Version int64 }
		Changes    []struct {
			Op, Path   string
			Old, Value json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range out.Changes {
		if c.Path == "/state/variables/wrap" && c.Op == "add" && string(c.Value) == `"`+long+`"` {
			found = true
		}
	}
	if out.WorkflowID != "order-1" || out.From.Version != 0 || out.To.Version != 2 || !found {
		t.Errorf("diff -o json: %+v", out)
	}

	b.golden("diff-unknown-workflow", 4, "", "diff", "nope", "0", "1")
	b.golden("diff-no-such-version", 4, "", "diff", "order-1", "1", "9")
	b.golden("diff-bad-version", 2, "", "diff", "order-1", "v1", "2")
	b.golden("diff-bad-args", 2, "", "diff", "order-1", "1")
}

// The changes of flowd diff -o json are a JSON Patch: applied to the first
// version's {"status", "state"} they give the second's.
func TestDiffVersionsIsAJSONPatch(t *testing.T) {
	t.Parallel()
	var a, b store.HistoryEntry
	a.Status, b.Status = workflow.StatusRunning, workflow.StatusCompleted
	if err := json.Unmarshal([]byte(`{"variables":{"n":1,"gone":{"x":1},"a/b":"s","~t":null},"steps":{"s":{"status":"RUNNING","attempts":1}},"extra":[1]}`), &a.State); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"variables":{"n":2,"a/b":"s","~t":{"deep":[null]},"new":{"y":[1,2]}},"steps":{"s":{"status":"COMPLETED","attempts":1,"output":null},"t":{"status":"PENDING"}},"extra":[1,2]}`), &b.State); err != nil {
		t.Fatal(err)
	}
	changes, err := diffVersions(a, b)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := versionDocument(a)
	if err != nil {
		t.Fatal(err)
	}
	var root any = doc
	for _, ch := range changes {
		toks := strings.Split(strings.TrimPrefix(ch.Path, "/"), "/")
		parent := root
		for _, tok := range toks[:len(toks)-1] {
			parent = parent.(map[string]any)[pointerUnescaper.Replace(tok)]
		}
		m, last := parent.(map[string]any), pointerUnescaper.Replace(toks[len(toks)-1])
		switch ch.Op {
		case "add", "replace":
			var v any
			dec := json.NewDecoder(strings.NewReader(string(ch.Value)))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			m[last] = v
		case "remove":
			delete(m, last)
		default:
			t.Fatalf("op %q", ch.Op)
		}
	}
	want, err := versionDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantJSON := rawJSON(root), rawJSON(want); !jsonEqual(got, wantJSON) {
		t.Errorf("the patch gives\n%s\nwant\n%s\nchanges: %+v", got, wantJSON, changes)
	}
}
