package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

// startServer runs a flowd server (API and engine, no in-process workers)
// over an in-memory SQLite store.
func startServer(t *testing.T) (string, *client.Client) {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, "sqlite::memory:", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	zero := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	api, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv.URL, client.New(srv.URL)
}

// The example, built and run as a user would, completes a step with the
// output of its command, and exits 0 on SIGTERM.
func TestShellWorker(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "shell-worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url, client := startServer(t)
	ctx := t.Context()
	hello, err := os.ReadFile("../hello/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.PutDefinition(ctx, "hello", hello); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "hello-1", Definition: "hello", Input: json.RawMessage(`{"name": "Ada"}`)}); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := exec.Command(bin, "-server", url, "-handler", "greet", "-command", "sh ../hello/greet.sh")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		inst, err := client.GetWorkflow(ctx, "hello-1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusCompleted {
			if got := string(inst.State.Steps["greet"].Output); got != `{"greeting":"Hello, Ada!"}` {
				t.Errorf("greet output %s", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hello-1 is still %s after 30s", inst.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("shell-worker exited with %v after SIGTERM; output:\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("shell-worker did not stop within 20s of SIGTERM")
	}
	if !strings.Contains(out.String(), `msg="task completed"`) {
		t.Errorf("no task line in the output:\n%s", out.String())
	}
}

func TestShellWorkerUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "-handler and -command are required"},
		{[]string{"-handler", "greet"}, 2, "-handler and -command are required"},
		{[]string{"-handler", "greet", "-command", "cat", "extra"}, 2, `unexpected arguments ["extra"]`},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"-server", "http://127.0.0.1:1", "-handler", "greet", "-command", "cat"}, 1, "shell-worker: worker: cannot reach the server: "},
	} {
		var stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		code := run(ctx, c.args, &stderr)
		cancel()
		if code != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("shell-worker %q: exit %d, stderr %q; want %d mentioning %q", c.args, code, stderr.String(), c.code, c.msg)
		}
	}
}
