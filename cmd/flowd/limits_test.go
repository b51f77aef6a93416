package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// waitWorkflow polls the workflow until it has status want.
func waitWorkflow(t *testing.T, c *client.Client, id string, want workflow.Status, timeout time.Duration) *workflow.Instance {
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
	c := client.New(url)
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
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "spin"})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitWorkflow(t, c, inst.ID, workflow.StatusFailed, 20*time.Second)
	if failed.Version != 39 || !strings.Contains(string(failed.Error), "reached --max-versions (40)") {
		t.Errorf("FAILED at version %d with error %s; want version 39 and the limit named", failed.Version, failed.Error)
	}
}

// --max-descendants (here from FLOWD_MAX_DESCENDANTS) stops a recursive
// child step with a four-item foreach at that many descendants, the
// workflow that would start one more failing with an error naming it.
func TestServeMaxDescendants(t *testing.T) {
	e, out, _ := testEnv(nil)
	if code := run(context.Background(), []string{"serve", "--help"}, e); code != 0 || !strings.Contains(out.String(), "(env FLOWD_MAX_DESCENDANTS) (default "+strconv.Itoa(engine.DefaultMaxDescendants)+")") {
		t.Errorf("serve --help: exit %d; want --max-descendants to default to the engine's %d:\n%s", code, engine.DefaultMaxDescendants, out)
	}
	url, _ := startServeEnv(t, map[string]string{"FLOWD_MAX_DESCENDANTS": "12"}, "--db", "sqlite:"+filepath.Join(t.TempDir(), "f.db"))
	c := client.New(url)
	ctx := context.Background()
	if _, _, err := c.PutDefinition(ctx, "fan", []byte("name: fan\nsteps:\n  - {id: sub, type: workflow, definition: fan, foreach: '[1, 2, 3, 4]'}\n")); err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "fan-root", Definition: "fan"})
	if err != nil {
		t.Fatal(err)
	}
	waitWorkflow(t, c, inst.ID, workflow.StatusFailed, 20*time.Second)
	deadline := time.Now().Add(15 * time.Second)
	for {
		page, err := c.ListWorkflows(ctx, client.ListOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		running, named := 0, 0
		for _, w := range page.Workflows {
			if w.Status == workflow.StatusRunning {
				running++
			}
			if st := w.State.Steps["sub"]; st != nil && strings.Contains(st.Error, "reached --max-descendants (12)") {
				named++
			}
		}
		if running == 0 {
			if len(page.Workflows) != 13 || named == 0 {
				t.Errorf("%d workflows (want 13: the top-level one and 12 descendants), %d naming the limit", len(page.Workflows), named)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workflows still run", running)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
