package examples

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

// exampleServer starts a server on a fresh SQLite database whose in-process
// workers run echo as the "echo" handler, applies the example definitions
// named (the files NAME.yaml of this folder, in order: a child's before its
// parent's) and returns its client.
func exampleServer(t *testing.T, echo engine.Handler, names ...string) *client.Client {
	t.Helper()
	ctx := context.Background()
	srv, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Register("echo", echo); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	for _, name := range names {
		body, err := os.ReadFile(name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.PutDefinition(ctx, name, body); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return c
}

// waitFor polls workflow id through c until done says so; a run that takes
// longer than 30 s fails the test (a hung run, not a timing assertion).
func waitFor(t *testing.T, c *client.Client, id string, done func(*workflow.Instance) bool) *workflow.Instance {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		inst, err := c.GetWorkflow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if done(inst) {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s %+v %s", id, inst.Status, inst.State.Steps, inst.State.Extra["sw"])
		}
	}
}
