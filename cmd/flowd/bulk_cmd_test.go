package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
)

// setupBulkCLI is a server whose engine works bulk operations off, with
// four instances of job (job-0 … job-3) and one of other.
func setupBulkCLI(t *testing.T) *cliBundle {
	t.Helper()
	b := setupCLI(t)
	st, clock := openCLIStore(t)
	none := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &none, NodeID: "node-1", Now: clock.Now, SweepInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	h, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.url, b.clock, b.client = srv.URL, clock, client.New(srv.URL)
	b.env["FLOWD_SERVER"] = srv.URL
	for _, def := range []string{"job", "other"} {
		if _, _, err := b.client.PutDefinition(t.Context(), def, fmt.Appendf(nil, `{"name": %q, "steps": [{"id": "a", "type": "wait"}]}`, def)); err != nil {
			t.Fatal(err)
		}
	}
	for i, def := range []string{"job", "job", "job", "job", "other"} {
		if _, err := b.client.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: fmt.Sprintf("%s-%d", def, i), Definition: def}); err != nil {
			t.Fatal(err)
		}
	}
	// The operations come later than the instances they act on.
	clock.Advance(time.Second)
	return b
}

// squash is s with every run of blanks one space.
func squash(s string) string { return regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ") }

var bulkIDLine = regexp.MustCompile(`(?m)^id:\s+(\S+)$`)

func TestBulkCommand(t *testing.T) {
	b := setupBulkCLI(t)

	// Waits, with a line per change of the progress, and ends with the
	// operation.
	res := b.run("", nil, "bulk", "pause", "--definition", "job", "--status", "running")
	if res.code != 0 || !strings.Contains(squash(res.stdout), "status: DONE") || !strings.Contains(squash(res.stdout), "matched: 4") ||
		!strings.Contains(squash(res.stdout), "done: 4") || !strings.Contains(squash(res.stdout), "filter: status=RUNNING definition=job") {
		t.Fatalf("bulk pause: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	m := bulkIDLine.FindStringSubmatch(res.stdout)
	if m == nil || !strings.Contains(res.stdout, m[1]+" DONE 4 matched: 4 done, 0 skipped, 0 failed\n") {
		t.Errorf("bulk pause: no progress line for the end:\n%s", res.stdout)
	}
	for i := range 4 {
		if inst, _ := b.client.GetWorkflow(t.Context(), fmt.Sprintf("job-%d", i)); inst.Status != "PAUSED" {
			t.Errorf("job-%d is %s", i, inst.Status)
		}
	}
	if inst, _ := b.client.GetWorkflow(t.Context(), "other-4"); inst.Status != "RUNNING" {
		t.Errorf("other-4, not matched, is %s", inst.Status)
	}

	// --no-wait prints the id; get shows it; cancel of a DONE one is 1.
	res = b.run("", nil, "bulk", "cancel", "--id-prefix", "job-1", "--no-wait")
	id := strings.TrimSpace(res.stdout)
	if res.code != 0 || !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(id) {
		t.Fatalf("bulk cancel --no-wait: %d %q %q", res.code, res.stdout, res.stderr)
	}
	var op *api.BulkOperation
	for deadline := time.Now().Add(10 * time.Second); op == nil || op.Status == "RUNNING"; time.Sleep(20 * time.Millisecond) {
		var err error
		if op, err = b.client.GetBulk(t.Context(), id); err != nil || time.Now().After(deadline) {
			t.Fatalf("bulk %s: %+v, %v", id, op, err)
		}
	}
	res = b.run("", nil, "bulk", "get", id)
	if res.code != 0 || !strings.Contains(squash(res.stdout), "action: cancel") || !strings.Contains(squash(res.stdout), "done: 1") {
		t.Errorf("bulk get: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = b.run("", nil, "bulk", "get", id, "-o", "json")
	var got api.BulkOperation
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || got.ID != id || got.Done != 1 {
		t.Errorf("bulk get -o json: %s %v", res.stdout, err)
	}
	res = b.run("", nil, "bulk", "cancel", id)
	if res.code != 1 || !strings.Contains(res.stderr, "is DONE") {
		t.Errorf("bulk cancel of a DONE one: %d %q", res.code, res.stderr)
	}
	// A cancelled one: cancel says so, and the wait exits 1.
	res = b.run("", nil, "bulk", "resume", "--where", "tier=gold", "--no-wait", "-o", "json")
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || got.Status != "RUNNING" || string(got.Filter.Search["tier"]) != `"gold"` {
		t.Fatalf("bulk resume --no-wait -o json: %d %s %s", res.code, res.stdout, res.stderr)
	}
	if res = b.run("", nil, "bulk", "cancel", got.ID); res.code != 0 && !strings.Contains(res.stderr, "is DONE") {
		t.Errorf("bulk cancel ID: %d %s %s", res.code, res.stdout, res.stderr)
	}

	// -o json waits and prints the operation alone.
	res = b.run("", nil, "bulk", "resume", "--definition", "job", "--limit", "2", "-o", "json")
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || res.code != 0 || got.Status != "DONE" || got.Done != 2 || got.Limit != 2 {
		t.Errorf("bulk resume --limit 2 -o json: %d %s %s", res.code, res.stdout, res.stderr)
	}
	// --since: created within it; the instances are a second old.
	res = b.run("", nil, "bulk", "cancel", "--since", "1ms")
	if res.code != 0 || !strings.Contains(squash(res.stdout), "matched: 0") {
		t.Errorf("bulk cancel --since 1ms: %d %s %s", res.code, res.stdout, res.stderr)
	}

	b.golden("bulk-get-unknown", 4, "", "bulk", "get", "nope")
	b.golden("bulk-cancel-unknown", 4, "", "bulk", "cancel", "nope")
	b.golden("bulk-no-action", 2, "", "bulk")
	b.golden("bulk-unknown-action", 2, "", "bulk", "explode", "--status", "RUNNING")
	b.golden("bulk-no-filter", 2, "", "bulk", "cancel")
	b.golden("bulk-bad-where", 2, "", "bulk", "pause", "--where", "tier")
	b.golden("bulk-bad-status", 2, "", "bulk", "pause", "--status", "SLEEPING")
	b.golden("bulk-get-no-id", 2, "", "bulk", "get")
	b.golden("bulk-get-with-filter", 2, "", "bulk", "get", "x", "--status", "RUNNING")
	b.golden("bulk-extra-arg", 2, "", "bulk", "pause", "job-1", "--status", "RUNNING")
	b.golden("bulk-bad-limit", 2, "", "bulk", "pause", "--status", "RUNNING", "--limit", "-1")
}
