package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
)

// flowd event publishes through POST /v1/events: it names the event and
// the workflows whose waiting steps it completed, prints the API's answer
// with -o json, exits 2 on a usage error before any request and 1 when the
// server refuses.
func TestCLIEvent(t *testing.T) {
	b := setupCLI(t)
	ctx := t.Context()
	if _, _, err := b.client.PutDefinition(ctx, "pay", []byte(`name: pay
steps:
  - {id: paid, type: wait, event: payment, key: "{{ .input.order }}"}
`)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"order-1", "order-1b"} {
		if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: id, Definition: "pay", Input: json.RawMessage(`{"order":"o-1"}`)}); err != nil {
			t.Fatal(err)
		}
	}

	// The server's clock stands at 2026-11-21T10:00:00Z; events are kept
	// 24 hours by default.
	const kept = "kept until 2026-11-22T10:00:00Z (the server's --event-retention): " +
		"a wait step for it that starts waiting later, in a workflow started before now, takes it then"
	res := b.run("", nil, "event", "payment", "--key", "o-1", "--data", `{"amount": 42}`)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "event ") || !strings.HasSuffix(lines[0], " published") ||
		(lines[1] != "2 waiting steps took it, in workflows: order-1, order-1b" && lines[1] != "2 waiting steps took it, in workflows: order-1b, order-1") ||
		lines[2] != kept {
		t.Errorf("flowd event: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	inst, err := b.client.GetWorkflow(ctx, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != "COMPLETED" || string(inst.State.Steps["paid"].Output) != `{"amount":42}` {
		t.Errorf("order-1 after the event: %s, paid %+v", inst.Status, inst.State.Steps["paid"])
	}

	res = b.run("", nil, "event", "payment", "--key", "o-1", "-o", "json")
	var out api.PublishEventResponse
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &out) != nil || out.ID == "" || out.Delivered == nil || len(out.Delivered) != 0 ||
		!out.ExpiresAt.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("flowd event -o json: exit %d, %s%s", res.code, res.stdout, res.stderr)
	}
	// An event no step waits for yet is not lost: the output says so.
	res = b.run("", nil, "event", "tick")
	if res.code != 0 || !strings.HasSuffix(res.stdout, "published\n0 waiting steps took it\n"+kept+"\n") {
		t.Errorf("flowd event tick: exit %d, %q", res.code, res.stdout)
	}
	res = b.run(`[1, 2]`, nil, "event", "tick", "--data", "-")
	if res.code != 0 {
		t.Errorf("flowd event --data -: exit %d, %s", res.code, res.stderr)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"event"}, exitUsage, "0 arguments given, 1 expected"},
		{[]string{"event", "a", "b"}, exitUsage, "2 arguments given, 1 expected"},
		{[]string{"event", "pay/ment"}, exitUsage, `NAME "pay/ment" has a character outside [A-Za-z0-9._:-]`},
		{[]string{"event", strings.Repeat("n", 129)}, exitUsage, "NAME is longer than 128 characters"},
		{[]string{"event", "tick", "--key", strings.Repeat("k", 257)}, exitUsage, "--key has 257 characters, more than 256"},
		{[]string{"event", "tick", "--data", "{"}, exitUsage, "--data is not valid JSON"},
		{[]string{"event", "tick", "--bogus"}, exitUsage, "unknown flag"},
		{[]string{"event", "tick", "--server", "http://127.0.0.1:1"}, exitError, ""},
	} {
		res := b.run("", nil, c.args...)
		if res.code != c.code || !strings.Contains(res.stderr, c.want) {
			t.Errorf("flowd %s: exit %d, stderr %q; want exit %d with %q", strings.Join(c.args, " "), res.code, res.stderr, c.code, c.want)
		}
	}
	// The token is sent: a server with tokens refuses the event without one.
	authed := setupCLI(t, "s3cret")
	if res := authed.run("", nil, "event", "tick"); res.code != exitError || !strings.Contains(res.stderr, "401") && !strings.Contains(strings.ToLower(res.stderr), "unauthorized") {
		t.Errorf("flowd event without a token: exit %d, %q", res.code, res.stderr)
	}
	if res := authed.run("", []string{"FLOWD_TOKEN=s3cret"}, "event", "tick"); res.code != 0 {
		t.Errorf("flowd event with FLOWD_TOKEN: exit %d, %q", res.code, res.stderr)
	}
}

// flowd event prints the waiting steps the event failed instead of
// completing (their workflow's state would pass the server's limit with
// its data), each with its error, after those it completed.
func TestCLIEventShowsFailedSteps(t *testing.T) {
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/events" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"ev-1","delivered":["w1"],"failed":[`+
			`{"workflow_id":"w2","step":"paid","error":"event \"payment\" (ev-1) cannot be delivered: too large"},`+
			`{"workflow_id":"w3","step":"paid","error":"also too large"}]}`)
	}))
	t.Cleanup(stub.Close)
	b := &cliBundle{t: t, url: stub.URL, env: map[string]string{"FLOWD_SERVER": stub.URL}}
	res := b.run("", nil, "event", "payment", "--data", `"big"`)
	// This server does not say until when it keeps the event.
	want := `event ev-1 published
1 waiting step took it, in workflows: w1
could not deliver it to 2 waiting steps, which failed:
  workflow w2 step paid: event "payment" (ev-1) cannot be delivered: too large
  workflow w3 step paid: also too large
kept for the server's --event-retention: a wait step for it that starts waiting later, in a workflow started before now, takes it then
`
	if res.code != 0 || res.stdout != want {
		t.Errorf("flowd event: exit %d\n%s\nwant\n%s%s", res.code, res.stdout, want, res.stderr)
	}
	res = b.run("", nil, "event", "payment", "-o", "json")
	var out api.PublishEventResponse
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &out) != nil || len(out.Failed) != 2 || out.Failed[1].WorkflowID != "w3" {
		t.Errorf("flowd event -o json: exit %d, %s%s", res.code, res.stdout, res.stderr)
	}
}
