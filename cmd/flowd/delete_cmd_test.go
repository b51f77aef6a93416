package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/workflow"
)

// runOnTerminal runs one command as from a terminal: stdin answers its
// questions.
func (b *cliBundle) runOnTerminal(stdin io.Reader, args ...string) cliResult {
	b.t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(b.t.Context(), args, &env{
		stdin: stdin, stdout: &stdout, stderr: &stderr,
		getenv:   func(name string) (string, bool) { v, ok := b.env[name]; return v, ok },
		terminal: func() bool { return true },
		now:      b.clock.Now,
	})
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// beforeAnswer is a terminal whose user does something else (do) before
// typing the answer.
type beforeAnswer struct {
	do     func()
	answer io.Reader
}

func (r *beforeAnswer) Read(p []byte) (int, error) {
	if r.do != nil {
		r.do()
		r.do = nil
	}
	return r.answer.Read(p)
}

// Without --if-match, delete asks on a terminal (or takes --yes) and then
// deletes at the version it read; without a terminal it needs one of the
// two, before any request.
func TestDeleteConfirms(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := t.Context()
	cancelled := func(id string) {
		t.Helper()
		if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.client.Action(ctx, id, "cancel"); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(id string) bool {
		t.Helper()
		_, err := b.client.GetWorkflow(ctx, id)
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	const prompt = "delete workflow %s (CANCELLED, version 1) with its history and child workflows? [y/N] "

	cancelled("d-1")
	b.golden("delete-needs-if-match-or-yes", exitUsage, "", "delete", "d-1")
	res := b.runOnTerminal(strings.NewReader("n\n"), "delete", "d-1")
	if res.code != exitError || res.stderr != strings.Replace(prompt, "%s", "d-1", 1)+"flowd: workflow d-1 not deleted\n" || !exists("d-1") {
		t.Errorf("answered n: %+v", res)
	}
	res = b.runOnTerminal(strings.NewReader(""), "delete", "d-1")
	if res.code != exitError || !strings.HasSuffix(res.stderr, "flowd: workflow d-1 not deleted\n") || !exists("d-1") {
		t.Errorf("no answer (end of input): %+v", res)
	}
	res = b.runOnTerminal(strings.NewReader("Yes\n"), "delete", "d-1")
	if res.code != 0 || res.stdout != "workflow d-1 deleted\n" || res.stderr != strings.Replace(prompt, "%s", "d-1", 1) || exists("d-1") {
		t.Errorf("answered yes: %+v", res)
	}

	cancelled("d-2")
	if res := b.run("", nil, "delete", "d-2", "--yes", "-o", "json"); res.code != 0 || !strings.Contains(res.stdout, `"deleted": true`) || exists("d-2") {
		t.Errorf("--yes without a terminal: %+v", res)
	}

	// A change between the read and the answer: nothing is deleted (3). A
	// CANCELLED workflow takes no patch: this one FAILED.
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "d-4"}); err != nil {
		t.Fatal(err)
	}
	for _, step := range [][2]workflow.Status{{workflow.StatusPending, workflow.StatusRunning}, {workflow.StatusRunning, workflow.StatusFailed}} {
		if _, err := b.client.Transition(ctx, "d-4", step[0], step[1]); err != nil {
			t.Fatal(err)
		}
	}
	changed := &beforeAnswer{answer: strings.NewReader("y\n"), do: func() {
		if _, err := b.client.PatchWorkflow(ctx, "d-4", "*", []byte(`{"variables":{"keep":true}}`)); err != nil {
			t.Error(err)
		}
	}}
	res = b.runOnTerminal(changed, "delete", "d-4")
	if res.code != exitPrecondition || !strings.Contains(res.stderr, "delete workflow d-4 (FAILED, version 2) with its history and child workflows? [y/N] flowd: 412 Precondition Failed") || !exists("d-4") {
		t.Errorf("changed before the answer: %+v", res)
	}

	// A workflow that is not finished is not asked about: the server says why.
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "live"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []cliResult{b.runOnTerminal(strings.NewReader("y\n"), "delete", "live"), b.run("", nil, "delete", "live", "--yes")} {
		if r.code != exitError || strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stderr, "409 Conflict") || !exists("live") {
			t.Errorf("delete of a PENDING workflow: %+v", r)
		}
	}
	if res := b.runOnTerminal(strings.NewReader("y\n"), "delete", "nope"); res.code != exitNotFound {
		t.Errorf("delete of an unknown workflow: %+v", res)
	}
}
