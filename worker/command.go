package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/api"
)

// ExitPermanent is the exit status with which a command run by Command fails
// its step at once, without the retries of the step's policy.
const ExitPermanent = 100

// StderrTail is how much of the end of a failed command's stderr becomes the
// error of the attempt.
const StderrTail = 4096

// commandKillGrace is how long a command's process group has between SIGTERM
// and SIGKILL once its task's context ends. It is shorter than abandonWait,
// so that the SIGKILL is sent before Run returns at shutdown.
const commandKillGrace = 800 * time.Millisecond

// Command returns a handler that runs command with `sh -c` for each task, in
// its own process group:
//   - the task's input JSON is its stdin;
//   - its environment is the worker's plus FLOWD_WORKFLOW_ID, FLOWD_STEP,
//     FLOWD_ATTEMPT and FLOWD_IDEMPOTENCY_KEY (the same for every attempt of a
//     step: key side effects on it, since tasks run at least once),
//     FLOWD_INDEX for an iteration of a foreach step, and TRACEPARENT when
//     the workflow has a trace;
//   - the JSON it writes on stdout is the step's output (nothing: null);
//     stdout that is not JSON fails the step without retrying;
//   - a non-zero exit status fails the attempt, which is retried per the
//     step's retry policy; exit status 100 (ExitPermanent) fails the step at
//     once. The last 4 KB of stderr (StderrTail) are the error, or the exit
//     status when stderr is empty.
//
// When ctx ends (the lease is lost, the step's timeout is reached, the worker
// abandons its tasks) the whole process group gets SIGTERM, and SIGKILL a
// moment later if it is still there, so that children the command started
// do not outlive the task.
func Command(command string) Handler {
	return func(ctx context.Context, t Task) (json.RawMessage, error) {
		return runCommand(ctx, command, t)
	}
}

func runCommand(ctx context.Context, command string, t Task) (json.RawMessage, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	input := t.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	cmd.Stdin = bytes.NewReader(input)
	cmd.Env = append(os.Environ(),
		"FLOWD_WORKFLOW_ID="+t.WorkflowID,
		"FLOWD_STEP="+t.Step,
		"FLOWD_ATTEMPT="+strconv.Itoa(t.Attempt),
		"FLOWD_IDEMPOTENCY_KEY="+t.IdempotencyKey,
	)
	if t.Index != nil {
		// An iteration of a foreach step: the index of its item.
		cmd.Env = append(cmd.Env, "FLOWD_INDEX="+strconv.Itoa(*t.Index))
	}
	if t.TraceParent != "" {
		// The workflow's trace, in the variable OpenTelemetry's
		// environment carrier reads, for a command that traces itself.
		cmd.Env = append(cmd.Env, "TRACEPARENT="+t.TraceParent)
	}
	stdout := &limitedBuffer{max: api.MaxBodyBytes}
	stderr := &tailBuffer{max: StderrTail}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	group := inOwnProcessGroup(cmd)
	cmd.Cancel = group.terminate
	// Wait returns at most this long after the command's context ended (or
	// sh exited) even if a child still holds stdout or stderr open.
	cmd.WaitDelay = commandKillGrace

	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting sh -c %q: %w", command, err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		// The result is dropped: the task is no longer ours. What is left of
		// the group gets the rest of the grace, then SIGKILL.
		group.kill(commandKillGrace)
		return nil, context.Cause(ctx)
	}
	if err != nil {
		var ee *exec.ExitError
		switch {
		case errors.Is(err, exec.ErrWaitDelay):
			return nil, fmt.Errorf("the command exited, but a process it started kept its stdout or stderr open for more than %s", commandKillGrace)
		case errors.As(err, &ee):
			msg := stderr.text()
			if msg == "" {
				msg = "the command " + exitStatus(ee)
			}
			if ee.ExitCode() == ExitPermanent {
				return nil, Permanent(errors.New(msg))
			}
			return nil, errors.New(msg)
		default:
			return nil, fmt.Errorf("running sh -c %q: %w", command, err)
		}
	}
	if stdout.overflow {
		return nil, Permanent(fmt.Errorf("the command wrote more than %d bytes on stdout, more than the server accepts as an output", stdout.max))
	}
	out := bytes.TrimSpace(stdout.buf.Bytes())
	if len(out) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(out) {
		return nil, Permanent(fmt.Errorf("the command's stdout is not JSON: %q", excerpt(out, 200)))
	}
	return json.RawMessage(out), nil
}

// exitStatus says how the process ended, for an error without stderr.
func exitStatus(ee *exec.ExitError) string {
	if code := ee.ExitCode(); code >= 0 {
		return fmt.Sprintf("exited with status %d and wrote nothing on stderr", code)
	}
	return fmt.Sprintf("ended (%s) and wrote nothing on stderr", ee.ProcessState.String())
}

// excerpt is the start of b, at most n bytes cut at a character boundary,
// with "…" when something was left out.
func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return strings.ToValidUTF8(string(b[:n]), "\uFFFD") + "…"
}

// limitedBuffer keeps the first max bytes written to it and notes whether
// there were more; it never fails a write, so the command is not killed by
// a broken pipe.
type limitedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.overflow = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		// Copy down rather than reslice, so the buffer does not grow with
		// everything the command ever wrote.
		b.buf = b.buf[:copy(b.buf, b.buf[over:])]
	}
	return len(p), nil
}

// text is the tail as valid UTF-8, without a character cut in half at its
// start and without surrounding white space.
func (b *tailBuffer) text() string {
	s := b.buf
	for n := 0; n < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); n++ {
		s = s[1:]
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(s), "\uFFFD"))
}
