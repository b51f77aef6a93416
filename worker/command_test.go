package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

func commandTask(input string) worker.Task {
	return worker.Task{
		ID: "t1", WorkflowID: "wf-1", Step: "greet", Handler: "greet", Attempt: 2,
		Input: json.RawMessage(input), IdempotencyKey: "wf-1/greet",
	}
}

// The command gets the input on stdin and the task in its environment, on
// top of the worker's own; its stdout is the output.
func TestCommandInputEnvironmentOutput(t *testing.T) {
	t.Parallel()
	h := worker.Command(`printf '{"wf":"%s","step":"%s","attempt":%s,"key":"%s","path":"%s","in":%s}' ` +
		`"$FLOWD_WORKFLOW_ID" "$FLOWD_STEP" "$FLOWD_ATTEMPT" "$FLOWD_IDEMPOTENCY_KEY" "$PATH" "$(cat)"`)
	out, err := h(t.Context(), commandTask(`{"name": "Ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		WF, Step, Key, Path string
		Attempt             int
		In                  map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	if got.WF != "wf-1" || got.Step != "greet" || got.Attempt != 2 || got.Key != "wf-1/greet" || got.In["name"] != "Ada" || got.Path != os.Getenv("PATH") {
		t.Errorf("the command saw %+v", got)
	}
}

// A task in a trace hands it to the command as TRACEPARENT; one without
// adds nothing to the worker's environment.
func TestCommandTraceParent(t *testing.T) {
	t.Parallel()
	h := worker.Command(`printf '"%s"' "${TRACEPARENT-unset}"`)
	task := commandTask(`{}`)
	task.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if out, err := h(t.Context(), task); err != nil || string(out) != `"`+task.TraceParent+`"` {
		t.Errorf("in a trace: output %s, %v; want the traceparent", out, err)
	}
	if _, inherited := os.LookupEnv("TRACEPARENT"); !inherited {
		if out, err := h(t.Context(), commandTask(`{}`)); err != nil || string(out) != `"unset"` {
			t.Errorf("without a trace: output %s, %v; want TRACEPARENT unset", out, err)
		}
	}
}

func TestCommandOutputs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ command, want string }{
		{"true", "null"},
		{"echo '  '", "null"},
		{`echo '[1, 2]'`, "[1, 2]"},
		{`echo '"text"'; echo noise >&2`, `"text"`},
	} {
		out, err := worker.Command(c.command)(t.Context(), commandTask(`{}`))
		if err != nil || string(out) != c.want {
			t.Errorf("%s: output %s, error %v; want %s", c.command, out, err, c.want)
		}
	}
}

func TestCommandFailures(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 6000)
	for _, c := range []struct {
		command   string
		permanent bool
		msg       string
	}{
		{`echo 'Hello, Ada!'`, true, `the command's stdout is not JSON: "Hello, Ada!"`},
		{`printf '%s' '` + long + `'`, true, `the command's stdout is not JSON: "` + strings.Repeat("x", 200) + `…"`},
		{`echo 'disk full' >&2; exit 1`, false, "disk full"},
		{`echo '{"partial": true}'; echo 'bad input' >&2; exit 100`, true, "bad input"},
		{`exit 3`, false, "the command exited with status 3 and wrote nothing on stderr"},
		{`exit 100`, true, "the command exited with status 100 and wrote nothing on stderr"},
		{`kill -KILL $$`, false, "the command ended (signal: killed) and wrote nothing on stderr"},
	} {
		out, err := worker.Command(c.command)(t.Context(), commandTask(`{}`))
		if err == nil || err.Error() != c.msg || engine.IsPermanent(err) != c.permanent {
			t.Errorf("%.60s: output %s, error %v (permanent %t); want %q (permanent %t)", c.command, out, err, engine.IsPermanent(err), c.msg, c.permanent)
		}
	}
}

// The error is the last 4 KB of stderr: the end of a long trace, where the
// cause usually is.
func TestCommandStderrTail(t *testing.T) {
	t.Parallel()
	_, err := worker.Command(`{ printf 'START'; head -c 6000 /dev/zero | tr '\0' 'e'; echo ' the cause'; } >&2; exit 1`)(t.Context(), commandTask(`{}`))
	if err == nil {
		t.Fatal("exit 1 did not fail")
	}
	msg := err.Error()
	if len(msg) != worker.StderrTail-1 || !strings.HasSuffix(msg, "eee the cause") || strings.Contains(msg, "START") {
		t.Errorf("error of %d bytes: %.40q…%q; want the last %d bytes of stderr, trimmed", len(msg), msg, msg[max(len(msg)-20, 0):], worker.StderrTail)
	}
}

// When the task's context ends (here: the step's timeout), the command and
// every process it started are killed, even those that ignore SIGTERM.
func TestCommandContextEndKillsProcessGroup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see whether a process is alive")
	}
	for _, c := range []struct{ name, trap string }{
		{"SIGTERM", ""},
		{"SIGKILL", "trap '' TERM; "}, // ignored by sh and inherited by sleep
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pid")
			ctx, cancel := context.WithTimeoutCause(t.Context(), 500*time.Millisecond, errors.New("step timed out"))
			defer cancel()
			h := worker.Command(c.trap + `sleep 60 & echo $! > ` + pidFile + `; wait`)
			done := make(chan error, 1)
			go func() {
				_, err := h(ctx, commandTask(`{}`))
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler did not return within 30s of its context ending")
			}
			if err == nil || err.Error() != "step timed out" {
				t.Errorf("error %v, want the context's cause", err)
			}
			b, rerr := os.ReadFile(pidFile)
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if rerr != nil || perr != nil {
				t.Fatalf("no pid of the child: %v %v", rerr, perr)
			}
			deadline := time.Now().Add(10 * time.Second)
			for alive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("sleep 60 (pid %d) still runs after its task ended", pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its parent has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// Through a real server: a command's output completes its step, exit 100
// fails the workflow with the command's stderr, exit 1 is retried.
func TestRunCommandHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.define(t, `
name: shell
steps:
  - {id: greet, type: task, handler: greet, input: {name: "{{ .input.name }}"}}
`)
	b.define(t, `
name: shell-fail
steps:
  - id: flaky
    type: task
    handler: flaky
    retry: {max_attempts: 2, initial_backoff: 10ms, max_backoff: 20ms}
  - {id: refuse, type: task, handler: refuse, depends_on: [flaky], retry: {max_attempts: 3}}
`)
	startWorker(t, worker.Config{Client: b.client, Wait: time.Second, Handlers: map[string]worker.Handler{
		"greet":  worker.Command(`sed 's/.*"name":"\([^"]*\)".*/{"greeting": "Hello, \1!"}/'`),
		"flaky":  worker.Command(`if [ "$FLOWD_ATTEMPT" = 1 ]; then echo 'try again' >&2; exit 1; fi; echo '{"attempt": '$FLOWD_ATTEMPT'}'`),
		"refuse": worker.Command(`echo 'no such customer' >&2; exit 100`),
	}})
	b.start(t, "shell", "s1", `{"name": "Ada"}`)
	b.start(t, "shell-fail", "s2", "")
	inst := b.waitStatus(t, "s1", workflow.StatusCompleted, 30*time.Second)
	if got := string(inst.State.Steps["greet"].Output); got != `{"greeting":"Hello, Ada!"}` {
		t.Errorf("greet output %s", got)
	}
	inst = b.waitStatus(t, "s2", workflow.StatusFailed, 30*time.Second)
	flaky, refuse := inst.State.Steps["flaky"], inst.State.Steps["refuse"]
	if string(flaky.Output) != `{"attempt":2}` || flaky.Attempts != 2 {
		t.Errorf("flaky: %+v", flaky)
	}
	if refuse.Status != workflow.StepFailed || refuse.Attempts != 1 || refuse.Error != "no such customer" {
		t.Errorf("refuse: %+v", refuse)
	}
}

// Through a real server: a step's timeout ends the attempt on the worker,
// and the command's children go with it; heartbeats kept the task meanwhile.
func TestRunCommandStepTimeout(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see whether a process is alive")
	}
	b := setup(t)
	b.define(t, `
name: slow
steps:
  - {id: nap, type: task, handler: nap, timeout: 2s, retry: {max_attempts: 1}}
`)
	pidFile := filepath.Join(t.TempDir(), "pid")
	logs := &logRecorder{}
	startWorker(t, worker.Config{Client: b.client, Wait: time.Second, Lease: time.Second, Logger: slog.New(logs),
		Handlers: map[string]worker.Handler{"nap": worker.Command(`sleep 60 & echo $! > ` + pidFile + `; wait`)}})
	b.start(t, "slow", "n1", "")
	b.waitStatus(t, "n1", workflow.StatusFailed, 30*time.Second)
	b2, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b2)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sleep 60 to be killed", func() bool { return !alive(pid) })
	waitFor(t, "the worker to drop the task", func() bool { return len(logs.find("task dropped")) == 1 })
}
