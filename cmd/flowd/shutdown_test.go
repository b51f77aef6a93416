package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/workflow"
)

// TestServeSIGTERM runs the real binary: SIGTERM while an in-process step
// runs and remote workers long-poll ends every poll at once with 204, lets
// the step finish and be recorded, and exits 0.
func TestServeSIGTERM(t *testing.T) {
	bin := buildFlowd(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--demo-handlers")
	cmd.Env = append(os.Environ(), "FLOWD_DB="+db, "FLOWD_SHUTDOWN_TIMEOUT=25s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve printed no URL; stderr:\n%s", stderr.String())
	}

	ctx := context.Background()
	c := client.New(url)
	inst := startSleepStep(t, c, "nap", 3000)

	const polls = 50
	var wg sync.WaitGroup
	errs := make(chan error, polls)
	for range polls {
		wg.Go(func() {
			wait := 60.0
			task, err := c.PollTask(ctx, api.PollRequest{Worker: "w", Handlers: []string{"elsewhere"}, WaitSeconds: &wait})
			if err == nil && task != nil {
				err = errors.New("a poll got a task")
			}
			errs <- err
		})
	}
	time.Sleep(300 * time.Millisecond) // let the polls reach the server
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	pollsDone := make(chan struct{})
	go func() { wg.Wait(); close(pollsDone) }()
	select {
	case <-pollsDone:
	case <-time.After(20 * time.Second):
		t.Fatal("long polls of 60 s were still waiting after SIGTERM")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("long poll after SIGTERM: %v, want 204", err)
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM, want 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit within 30 s of SIGTERM; stderr:\n%s", stderr.String())
	}

	// The step finished during the shutdown and was recorded once: a new
	// server without workers shows it completed after one attempt.
	url2, _ := startServe(t, "--db", db, "--workers", "0")
	got, err := client.New(url2).GetWorkflow(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.State.Steps["a"]; got.Status != workflow.StatusCompleted || a.Attempts != 1 || string(a.Output) != `{"slept_ms":3000}` {
		t.Fatalf("after SIGTERM: %s, step a %+v; want COMPLETED after 1 attempt", got.Status, a)
	}
}

func TestServeShutdownTimeoutFlag(t *testing.T) {
	e, _, errOut := testEnv(nil)
	if code := run(context.Background(), []string{"serve", "--shutdown-timeout", "0s"}, e); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if want := "--shutdown-timeout must be positive, got 0s"; !strings.Contains(errOut.String(), want) {
		t.Fatalf("stderr %q, want %q", errOut.String(), want)
	}
}

// A --shutdown-timeout shorter than a running step: serve still exits 0, and
// the step's task is released, claimable at once by the next node.
func TestServeShutdownTimeoutReleases(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")
	url, stop := startServe(t, "--db", db, "--demo-handlers", "--shutdown-timeout", "200ms", "--lease", "1h")
	ctx := context.Background()
	c := client.New(url)
	inst := startSleepStep(t, c, "long-nap", 600000)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d after a shutdown past its timeout, want 0", code)
	}

	url2, _ := startServe(t, "--db", db, "--workers", "0")
	task, err := client.New(url2).PollTask(ctx, api.PollRequest{Worker: "w", Handlers: []string{"sleep"}})
	if err != nil || task == nil || task.WorkflowID != inst.ID {
		t.Fatalf("the step's task is not claimable at once (lease of an hour): %+v, %v", task, err)
	}
}

// startSleepStep stores a one-step definition NAME whose step "a" sleeps ms
// milliseconds on the demo handler, starts a workflow of it and waits until
// the step runs.
func startSleepStep(t *testing.T, c *client.Client, name string, ms int) *workflow.Instance {
	t.Helper()
	ctx := t.Context()
	def := fmt.Sprintf(`{"name": %q, "steps": [{"id": "a", "type": "task", "handler": "sleep", "input": {"ms": %d}}]}`, name, ms)
	if _, _, err := c.PutDefinition(ctx, name, []byte(def)); err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Definition: name})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		got, err := c.GetWorkflow(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a := got.State.Steps["a"]; a != nil && a.Status == workflow.StepRunning {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("step a of %s never started: %+v", name, got.State.Steps["a"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
