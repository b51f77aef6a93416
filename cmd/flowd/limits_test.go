package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

// waitWorkflow polls the workflow until it has status want.
func waitWorkflow(t *testing.T, c *httpapi.Client, id string, want workflow.Status, timeout time.Duration) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		inst, err := c.GetWorkflow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == want {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s is %s at version %d after %s, want %s", id, inst.Status, inst.Version, timeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --max-versions (here from FLOWD_MAX_VERSIONS) stops a Serverless Workflow
// task that jumps to itself: FAILED at the limit, its error naming it.
func TestServeMaxVersions(t *testing.T) {
	e, out, _ := testEnv(nil)
	if code := run(context.Background(), []string{"serve", "--help"}, e); code != 0 || !strings.Contains(out.String(), "(env FLOWD_MAX_VERSIONS) (default "+strconv.Itoa(engine.DefaultMaxVersions)+")") {
		t.Errorf("serve --help: exit %d; want --max-versions to default to the engine's %d:\n%s", code, engine.DefaultMaxVersions, out)
	}
	url, _ := startServeEnv(t, map[string]string{"FLOWD_MAX_VERSIONS": "40"}, "--db", "sqlite:"+filepath.Join(t.TempDir(), "f.db"))
	c := httpapi.NewClient(url)
	ctx := context.Background()
	if _, _, err := c.PutDefinition(ctx, "spin", []byte(`
document: {dsl: '1.0.0', namespace: test, name: spin, version: '1.0.0'}
do:
  - spin:
      set:
        n: ${ (.n // 0) + 1 }
      then: spin
`)); err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{Definition: "spin"})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitWorkflow(t, c, inst.ID, workflow.StatusFailed, 20*time.Second)
	if failed.Version != 39 || !strings.Contains(string(failed.Error), "reached --max-versions (40)") {
		t.Errorf("FAILED at version %d with error %s; want version 39 and the limit named", failed.Version, failed.Error)
	}
}
