package examples

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

// build compiles the example program in dir.
func build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	if out, err := exec.Command("go", "build", "-o", bin, "./"+dir).CombinedOutput(); err != nil {
		t.Fatalf("go build ./%s: %v\n%s", dir, err, out)
	}
	return bin
}

// examples/go-worker against a real server that runs no step itself: the
// step completes through the worker, which then stops on SIGTERM with 0.
func TestGoWorkerExample(t *testing.T) {
	t.Parallel()
	bin := build(t, "go-worker")
	ctx := context.Background()
	zero := 0
	srv, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Addr: "127.0.0.1:0", Workers: &zero})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "FLOWD_SERVER="+srv.URL())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	c := srv.Client()
	def, err := os.ReadFile("go-worker/greeting.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutDefinition(ctx, "greeting", def); err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: "greeting", Input: json.RawMessage(`{"name": "ana"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); inst.Status != workflow.StatusCompleted; {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never completed the step: %+v; worker stderr:\n%s", inst.State.Steps, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
		if inst, err = c.GetWorkflow(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	if out := string(inst.State.Steps["hello"].Output); out != `"hello, ana"` {
		t.Fatalf("step hello output %s, want \"hello, ana\"", out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("go-worker exited with %v after SIGTERM, want 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("go-worker did not stop after SIGTERM")
	}
}

// examples/embedded runs its own server, completes a workflow in process,
// prints it and exits 0.
func TestEmbeddedExample(t *testing.T) {
	t.Parallel()
	bin := build(t, "embedded")
	cmd := exec.Command(bin, "-db", "sqlite:"+filepath.Join(t.TempDir(), "flowd.db"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("embedded exited with %v; stdout %q; stderr:\n%s", err, lines, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("embedded did not finish")
	}
	out := strings.Join(lines, "\n")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^flowd is serving the API at http://127\.0\.0\.1:\d+/v1 and the dashboard at http://127\.0\.0\.1:\d+/$`),
		regexp.MustCompile(`(?m)^started workflow \S+$`),
		regexp.MustCompile(`(?m)^workflow \S+ is COMPLETED: quote = \{"kg":3,"price":13\.5\}$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}
}
