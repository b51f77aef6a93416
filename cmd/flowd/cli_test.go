package main

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/workflow"
)

var update = flag.Bool("update", false, "rewrite cmd/flowd/testdata/*.golden from the current output")

// testClock is the store's clock: it stands still until the test moves it, so
// every timestamp in the output is known.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// cliBundle is a real API server on httptest over an in-memory SQLite store,
// and the environment the commands run with.
type cliBundle struct {
	t      *testing.T
	url    string
	clock  *testClock
	client *client.Client
	env    map[string]string
}

// openCLIStore is a migrated in-memory SQLite store on a test clock set to
// the time the golden files show.
func openCLIStore(t *testing.T) (*sqlite.Store, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	st, err := sqlite.Open(t.Context(), "sqlite::memory:", sqlite.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, clock
}

func setupCLI(t *testing.T, tokens ...string) *cliBundle {
	t.Helper()
	st, clock := openCLIStore(t)
	handler, err := httpapi.NewServer(httpapi.Config{Store: st, Tokens: httpapi.AdminTokens(tokens...)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	var opts []client.Option
	if len(tokens) > 0 {
		opts = append(opts, client.WithToken(tokens[0]))
	}
	return &cliBundle{
		t: t, url: srv.URL, clock: clock,
		client: client.New(srv.URL, opts...),
		// The server comes from the environment, as it would in a shell
		// session, which also keeps the random port out of the goldens.
		env: map[string]string{"FLOWD_SERVER": srv.URL},
	}
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// run runs one command in-process, with stdin and extra environment
// variables given as NAME=value strings.
func (b *cliBundle) run(stdin string, extra []string, args ...string) cliResult {
	b.t.Helper()
	vars := map[string]string{}
	for k, v := range b.env {
		vars[k] = v
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var stdout, stderr bytes.Buffer
	var now func() time.Time
	if b.clock != nil {
		now = b.clock.Now
	}
	code := run(b.t.Context(), args, &env{
		stdin:  strings.NewReader(stdin),
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(name string) (string, bool) { v, ok := vars[name]; return v, ok },
		now:    now,
	})
	return cliResult{
		stdout: strings.ReplaceAll(stdout.String(), b.url, "http://flowd.test"),
		stderr: strings.ReplaceAll(stderr.String(), b.url, "http://flowd.test"),
		code:   code,
	}
}

// golden runs a command, checks its exit code, and compares a transcript of
// it (command line, stdout, stderr, exit code) with testdata/NAME.golden.
func (b *cliBundle) golden(name string, wantCode int, stdin string, args ...string) cliResult {
	b.t.Helper()
	res := b.run(stdin, nil, args...)
	if res.code != wantCode {
		b.t.Errorf("%s: flowd %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), res.code, wantCode, res.stdout, res.stderr)
	}
	var tr strings.Builder
	tr.WriteString("$ ")
	if stdin != "" {
		tr.WriteString("echo " + shellQuote(strings.TrimSuffix(stdin, "\n")) + " | ")
	}
	tr.WriteString("flowd")
	for _, a := range args {
		tr.WriteString(" " + shellQuote(a))
	}
	tr.WriteString("\n" + res.stdout)
	if res.stderr != "" {
		tr.WriteString("[stderr]\n" + res.stderr)
	}
	tr.WriteString("[exit " + strconv.Itoa(res.code) + "]\n")
	checkGolden(b.t, name, tr.String())
	return res
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/flowd -run %s -update to create it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

// TestCLIGolden drives one server through the life of a few workflows with
// every client command; each step's transcript is a golden file.
func TestCLIGolden(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := t.Context()
	minute := time.Minute

	b.golden("start", 0, "", "start", "--free-form", "--id", "order-1", "--input", `{"sku":"A-1","qty":2}`, "--state",
		`{"variables":{"counter":1,"customer":{"name":"Ana Lima","tier":"gold","since":"2019-04-01","notes":"prefers morning deliveries"}},`+
			`"steps":{"reserve":{"status":"COMPLETED","output":{"reserved":true,"warehouse":"lis-2"},"attempts":1},"approve":{"status":"WAITING"},"ship":{"status":"PENDING"}}}`)
	b.clock.Advance(minute)
	b.golden("start-json", 0, "", "start", "--free-form", "--id", "order-2", "--input", `{"sku":"B-7"}`, "-o", "json")
	b.clock.Advance(minute)
	b.golden("start-free-form", 0, "", "start", "--free-form", "--id", "invoice-9", "--state", `{"variables":{"total":120.5},"region":"eu","steps":{"charge":{"status":"FAILED","attempts":3,"error":"card declined: the issuing bank reported insufficient funds for this amount"}}}`)
	b.clock.Advance(minute)
	if _, err := b.client.Transition(ctx, "invoice-9", workflow.StatusPending, workflow.StatusRunning); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(minute)
	b.golden("start-exists", 1, "", "start", "--free-form", "--id", "order-1")

	b.golden("get", 0, "", "get", "order-1")
	b.golden("get-json", 0, "", "get", "order-1", "-o", "json")
	b.golden("get-free-form", 0, "", "get", "invoice-9")

	b.clock.Advance(minute)
	b.golden("patch", 0, "", "patch", "order-1", "--if-match", "0", `{"variables":{"counter":2,"note":"checked by ana"}}`)
	b.golden("patch-stale", 3, "", "patch", "order-1", "--if-match", "0", `{"variables":{"counter":3}}`)
	b.clock.Advance(minute)
	b.golden("patch-stdin-json", 0, `{"variables":{"note":null}}`+"\n", "patch", "order-1", "--if-match", "1", "-", "-o", "json")

	b.clock.Advance(minute)
	b.golden("complete", 0, "", "complete", "order-1", "approve", "--if-match", "2", "--output", `{"approved_by":"ana"}`)
	b.golden("complete-stale", 3, "", "complete", "order-1", "ship", "--if-match", "2")
	b.clock.Advance(minute)
	b.golden("complete-json", 0, "", "complete", "order-1", "ship", "--if-match", "*", "-o", "json")
	b.golden("complete-again", 1, "", "complete", "order-1", "approve", "--if-match", "*")
	b.golden("complete-unknown-step", 4, "", "complete", "order-1", "pack", "--if-match", "4")
	b.golden("get-after-complete", 0, "", "get", "order-1")

	b.clock.Advance(minute)
	b.golden("pause", 0, "", "pause", "invoice-9")
	b.clock.Advance(minute)
	b.golden("resume-json", 0, "", "resume", "invoice-9", "-o", "json")
	b.clock.Advance(minute)
	b.golden("cancel", 0, "", "cancel", "order-2")
	b.golden("retry-refused", 1, "", "retry", "order-2")
	b.golden("patch-terminal", 1, "", "patch", "order-2", "--if-match", "*", `{"variables":{"x":1}}`)

	b.golden("history", 0, "", "history", "order-1")
	b.golden("history-status-changes", 0, "", "history", "invoice-9")
	b.golden("history-json", 0, "", "history", "order-2", "-o", "json")

	b.golden("list", 0, "", "list")
	b.golden("list-json", 0, "", "list", "--limit", "1", "-o", "json")
	b.golden("list-page", 0, "", "list", "--limit", "2")
	first := b.run("", nil, "list", "--limit", "2", "-o", "json")
	cursor := between(first.stdout, `"next_cursor": "`, `"`)
	b.golden("list-next-page", 0, "", "list", "--limit", "2", "--cursor", cursor)
	b.golden("list-status", 0, "", "list", "--status", "running")
	b.golden("list-empty", 0, "", "list", "--status", "FAILED")

	// A start with an idempotency key, repeated, and the key reused.
	b.golden("start-idempotent", 0, "", "start", "--free-form", "--id", "keyed-1", "--idempotency-key", "order-A-1")
	b.golden("start-idempotent-repeat", 0, "", "start", "--free-form", "--id", "keyed-1", "--idempotency-key", "order-A-1")
	b.golden("start-idempotent-other", 1, "", "start", "--free-form", "--id", "keyed-2", "--idempotency-key", "order-A-1")
	b.golden("start-bad-idempotency-key", 2, "", "start", "--free-form", "--idempotency-key", strings.Repeat("k", 256))

	// Not found, usage errors: nothing is sent for these.
	b.golden("get-not-found", 4, "", "get", "nope")
	b.golden("history-not-found", 4, "", "history", "nope")
	b.golden("bad-flag", 2, "", "get", "order-1", "--bogus")
	b.golden("bad-args", 2, "", "get")
	b.golden("bad-if-match", 2, "", "patch", "order-1", "--if-match", "v3", `{}`)
	b.golden("missing-if-match", 2, "", "patch", "order-1", `{}`)
	b.golden("bad-json", 2, "", "patch", "order-1", "--if-match", "4", `{"variables":`)
	b.golden("patch-not-object", 2, "", "patch", "order-1", "--if-match", "4", `[1]`)
	b.golden("complete-output-format-mixup", 2, "", "complete", "order-1", "approve", "--if-match", "4", "--output", "json")
	b.golden("bad-output-format", 2, "", "list", "-o", "yaml")
	b.golden("bad-status", 2, "", "list", "--status", "DONE")
	b.golden("bad-id", 2, "", "start", "--free-form", "--id", "no spaces")
	b.golden("help-patch", 0, "", "patch", "--help")

	// delete: the errors first (nothing deleted), then the delete.
	b.golden("delete-missing-if-match", 2, "", "delete", "order-2")
	b.golden("delete-live", 1, "", "delete", "order-1", "--if-match", "*")
	b.golden("delete-stale", 3, "", "delete", "order-2", "--if-match", "0")
	b.golden("delete", 0, "", "delete", "order-2", "--if-match", "1")
	b.golden("delete-not-found", 4, "", "delete", "order-2", "--if-match", "*")
	b.golden("history-deleted", 4, "", "history", "order-2")
	if res := b.run("", nil, "cancel", "keyed-1"); res.code != 0 {
		t.Fatalf("cancel keyed-1: %+v", res)
	}
	b.golden("delete-json", 0, "", "delete", "keyed-1", "--if-match", "*", "-o", "json")
	b.golden("help-delete", 0, "", "delete", "--help")

	// --priority: 1–5, shown by get; anything else is a usage error.
	b.golden("start-priority", 0, "", "start", "--free-form", "--id", "urgent-1", "--priority", "5")
	b.golden("get-priority", 0, "", "get", "urgent-1")
	b.golden("start-bad-priority", 2, "", "start", "--free-form", "--id", "urgent-2", "--priority", "9")
}

func between(s, start, end string) string {
	_, rest, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(rest, end)
	return v
}

// Only --server, --token and the output format come from the environment:
// an exported FLOWD_IF_MATCH or FLOWD_ID must not change what a command does.
func TestCLIEnvironment(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	if res := b.run("", []string{"FLOWD_ID=from-env"}, "start", "--free-form"); res.code != 0 || strings.Contains(res.stdout, "from-env") {
		t.Errorf("FLOWD_ID was used: %+v", res)
	}
	b.run("", nil, "start", "--free-form", "--id", "w", "--state", `{"steps":{"s":{"status":"WAITING"}}}`)
	res := b.run("", []string{"FLOWD_IF_MATCH=*"}, "patch", "w", `{"variables":{"x":1}}`)
	if res.code != exitUsage || !strings.Contains(res.stderr, "--if-match is required") {
		t.Errorf("FLOWD_IF_MATCH was used: %+v", res)
	}
	res = b.run("", []string{"FLOWD_OUTPUT=json"}, "get", "w")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "{\n  \"id\": \"w\"") {
		t.Errorf("FLOWD_OUTPUT=json: %+v", res)
	}
	// On complete, FLOWD_OUTPUT is the format, never the step's output.
	res = b.run("", []string{"FLOWD_OUTPUT=json"}, "complete", "w", "s", "--if-match", "0")
	if res.code != 0 || !strings.Contains(res.stdout, `"output": null`) {
		t.Errorf("complete with FLOWD_OUTPUT=json: %+v", res)
	}
	res = b.run("", []string{"FLOWD_OUTPUT=yaml"}, "get", "w")
	if res.code != exitUsage {
		t.Errorf("FLOWD_OUTPUT=yaml: %+v", res)
	}
	// --server beats FLOWD_SERVER.
	res = b.run("", nil, "get", "w", "--server", "http://127.0.0.1:1")
	if res.code != exitError || !strings.Contains(res.stderr, "cannot reach the flowd server at http://127.0.0.1:1") {
		t.Errorf("unreachable --server: %+v", res)
	}
	res = b.run("", []string{"FLOWD_SERVER=localhost:8080"}, "get", "w")
	if res.code != exitUsage || !strings.Contains(res.stderr, "not a server URL") {
		t.Errorf("bad FLOWD_SERVER: %+v", res)
	}
}

func TestCLIToken(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, "s3cret")
	if _, err := b.client.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	b.golden("unauthorized", 1, "", "get", "w")
	if res := b.run("", []string{"FLOWD_TOKEN=s3cret"}, "get", "w"); res.code != 0 {
		t.Errorf("FLOWD_TOKEN: %+v", res)
	}
	if res := b.run("", nil, "get", "w", "--token", "s3cret"); res.code != 0 {
		t.Errorf("--token: %+v", res)
	}
	if res := b.run("", []string{"FLOWD_TOKEN=wrong"}, "get", "w"); res.code != exitError || strings.Contains(res.stderr, "wrong") {
		t.Errorf("a wrong token must fail without being echoed: %+v", res)
	}
}

// Text output never passes terminal control sequences through from the state.
func TestCLIEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	_, err := b.client.CreateWorkflow(context.Background(), api.CreateWorkflowRequest{
		ID:    "w",
		State: []byte(`{"variables":{"x\u001b[2Jy":"\u001b[31mred"},"steps":{"s":{"status":"FAILED","error":"boom\n\u001b]0;title\u0007"}}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"get", "w"}, {"history", "w"}, {"list"}} {
		res := b.run("", nil, args...)
		if res.code != 0 || strings.ContainsAny(res.stdout, "\x1b\x07") {
			t.Errorf("flowd %v printed a control character:\n%q", args, res.stdout)
		}
	}
}

// TestCLIDefinitions covers def apply, list and get, and how a rejected
// definition is reported.
func TestCLIDefinitions(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)

	b.golden("def-list-empty", 0, "", "def", "list")
	b.golden("def-apply", 0, "", "def", "apply", "testdata/def-order.yaml")
	b.golden("def-apply-unchanged", 0, "", "def", "apply", "testdata/def-order.yaml")
	b.clock.Advance(time.Minute)
	b.golden("def-apply-json", 0, `{"name":"order","steps":[{"id":"reserve","type":"task","handler":"reserve-stock"}]}`+"\n",
		"def", "apply", "-", "-o", "json")
	b.golden("def-apply-other", 0, "name: refund\nsteps: [{id: pay-back, type: task, handler: echo, input: \"{{ .input }}\"}]\n",
		"def", "apply", "-")
	b.golden("def-list", 0, "", "def", "list")
	// The engine owns the steps of a definition-based instance.
	if res := b.run("", nil, "start", "order", "--id", "o-1", "--input", `{"sku":"A-1","id":"o-1"}`); res.code != 0 {
		t.Fatalf("start order: %+v", res)
	}
	b.golden("patch-engine-steps", 1, "", "patch", "o-1", "--if-match", "*", `{"steps":{"approve":{"status":"COMPLETED","output":{"forged":true}}}}`)
	b.golden("def-list-json", 0, "", "def", "list", "-o", "json")
	b.golden("def-get", 0, "", "def", "get", "order", "--revision", "1")
	b.golden("def-get-latest", 0, "", "def", "get", "order")
	b.golden("def-get-json", 0, "", "def", "get", "refund", "-o", "json")

	// Rejected definitions: every problem, one a line; nothing stored.
	b.golden("def-apply-invalid", 1, `{name: bad, steps: [{id: a, type: task}, {id: b, type: wait, depends_on: [zz]}, {id: c, type: sleep, duration: 5 parsecs}]}`+"\n",
		"def", "apply", "-")
	// Template problems: a bad reference hides neither the next one nor a bad
	// dependency; each line names the step, the field and the reference.
	b.golden("def-apply-invalid-template", 1, `{name: tpl, steps: [{id: a, type: task, handler: echo, input: {x: "{{ .steps.zz.output }}/{{ .steps.b.output }}", y: "{{ .foo }}"}}, {id: b, type: http, depends_on: [nope], request: {method: GET, url: "http://h/{{ .steps.b.output }}"}}]}`+"\n",
		"def", "apply", "-")
	b.golden("def-apply-no-name", 1, `{steps: [{id: a, type: task}]}`+"\n", "def", "apply", "-")
	b.golden("def-apply-missing-file", 1, "", "def", "apply", "testdata/no-such-file.yaml")
	b.golden("def-get-not-found", 4, "", "def", "get", "bad")
	b.golden("def-get-revision-not-found", 4, "", "def", "get", "order", "--revision", "7")
	b.golden("def-get-bad-revision", 2, "", "def", "get", "order", "--revision", "0")
	b.golden("def-apply-bad-args", 2, "", "def", "apply")

	// What get prints, apply takes back unchanged.
	for _, name := range []string{"order", "refund"} {
		got := b.run("", nil, "def", "get", name)
		again := b.run(got.stdout, nil, "def", "apply", "-")
		if again.code != 0 || !strings.HasSuffix(again.stdout, "(unchanged)\n") {
			t.Errorf("def get %s | def apply -: %+v\ninput:\n%s", name, again, got.stdout)
		}
	}
	first := b.run("", nil, "def", "get", "order", "--revision", "1")
	again := b.run(first.stdout, nil, "def", "apply", "-")
	if again.code != 0 || again.stdout != "definition order revision 3 (created)\n" {
		t.Errorf("re-applying revision 1 makes revision 3: %+v", again)
	}

	// def delete: refused while o-1 runs, then every revision goes, and
	// applying the name again continues its revisions.
	b.golden("def-delete-in-use", 1, "", "def", "delete", "order")
	b.golden("def-delete-not-found", 4, "", "def", "delete", "nope")
	b.golden("def-delete", 0, "", "def", "delete", "refund")
	b.golden("def-get-deleted", 4, "", "def", "get", "refund")
	b.golden("def-apply-after-delete", 0, "name: refund\nsteps: [{id: pay-back, type: task, handler: echo}]\n", "def", "apply", "-")
	b.golden("def-delete-json", 0, "", "def", "delete", "refund", "-o", "json")
	b.golden("def-delete-bad-args", 2, "", "def", "delete")
}

func TestCLIWorkerUsage(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.golden("worker-unknown-handler", 2, "", "worker", "--handlers", "echo,charge-card")
	b.golden("worker-no-handlers", 2, "", "worker")
	b.golden("worker-bad-lease", 2, "", "worker", "--handlers", "echo", "--lease", "10ms")
	b.golden("worker-handler-no-equals", 2, "", "worker", "--handler", "python3 greet.py")
	b.golden("worker-handler-no-name", 2, "", "worker", "--handler", "=python3 greet.py")
	b.golden("worker-handler-bad-name", 2, "", "worker", "--handler", "my greet=python3 greet.py")
	b.golden("worker-handler-reserved-name", 2, "", "worker", "--handler", "flowd:sleep=sleep 1")
	b.golden("worker-handler-empty-command", 2, "", "worker", "--handler", "greet= ")
	b.golden("worker-handler-twice", 2, "", "worker", "--handler", "greet=./greet.sh", "--handler", "greet=python3 greet.py")
	b.golden("worker-handler-and-handlers", 2, "", "worker", "--handlers", "echo,sleep", "--handler", "echo=cat")
}

// flowd worker --handler NAME=COMMAND runs the command for each task: the
// input on stdin, the task in the environment, the output on stdout; a
// command that exits 100 fails its step at once with its stderr. A comma in
// the command is part of it.
func TestCLIWorkerCommand(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := t.Context()
	def := "name: shell\nsteps:\n" +
		"  - {id: greet, type: task, handler: greet, input: {name: \"{{ .input.name }}\"}}\n" +
		"  - {id: check, type: task, handler: check, depends_on: [greet]}\n"
	if _, _, err := b.client.PutDefinition(ctx, "shell", []byte(def)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "sh-1", Definition: "shell", Input: []byte(`{"name":"Ada"}`)}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan cliResult, 1)
	go func() {
		done <- b.runUntil(stop, "worker", "--lease", "5s",
			"--handler", `greet=printf '{"greeting": "Hello, %s!", "step": "%s", "attempt": %s}' "$(sed 's/.*"name":"\([^"]*\)".*/\1/')" "$FLOWD_STEP" "$FLOWD_ATTEMPT"`,
			"--handler", "check=echo 'not today, sorry' >&2; exit 100")
	}()
	deadline := time.Now().Add(30 * time.Second)
	var inst *workflow.Instance
	for {
		var err error
		if inst, err = b.client.GetWorkflow(ctx, "sh-1"); err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusFailed || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	res := <-done
	greet, check := inst.State.Steps["greet"], inst.State.Steps["check"]
	if inst.Status != workflow.StatusFailed || string(greet.Output) != `{"greeting":"Hello, Ada!","step":"greet","attempt":1}` ||
		check.Error != "not today, sorry" || check.Attempts != 1 {
		t.Errorf("workflow %s, greet %+v, check %+v; worker stderr:\n%s", inst.Status, greet, check, res.stderr)
	}
	if res.code != 0 || !strings.Contains(res.stderr, `msg="worker started" name=`) || !strings.Contains(res.stderr, "handlers=check,greet") {
		t.Errorf("flowd worker exited %d, stderr:\n%s", res.code, res.stderr)
	}
}

// A worker pointed at no server exits 1 at once and names the server.
func TestCLIWorkerUnreachable(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.env = map[string]string{"FLOWD_SERVER": "http://127.0.0.1:1"}
	done := make(chan cliResult, 1)
	go func() { done <- b.runUntil(make(chan struct{}), "worker", "--handler", "greet=cat") }()
	select {
	case res := <-done:
		if res.code != exitError || !strings.Contains(res.stderr, "flowd: cannot reach the flowd server at http://127.0.0.1:1 ") ||
			!strings.Contains(res.stderr, "connection refused") || strings.Contains(res.stderr, "WARN") {
			t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("flowd worker against a closed port still runs after 30s")
	}
}

// runUntil runs one command in-process until stop is closed, then cancels
// its context as SIGINT would.
func (b *cliBundle) runUntil(stop <-chan struct{}, args ...string) cliResult {
	b.t.Helper()
	ctx, cancel := context.WithCancel(b.t.Context())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &env{
		stdin:  strings.NewReader(""),
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(name string) (string, bool) { v, ok := b.env[name]; return v, ok },
	})
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// flowd worker runs the steps of a workflow, logs a line a task, and exits 0
// when interrupted.
func TestCLIWorker(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	ctx := t.Context()
	def := "name: pipe\nsteps:\n" +
		"  - {id: a, type: task, handler: echo, input: {x: \"{{ .input.x }}\"}}\n" +
		"  - {id: b, type: task, handler: sleep, depends_on: [a], input: {ms: 50}}\n"
	if _, _, err := b.client.PutDefinition(ctx, "pipe", []byte(def)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "w1", Definition: "pipe", Input: []byte(`{"x":7}`)}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan cliResult, 1)
	go func() {
		done <- b.runUntil(stop, "worker", "--handlers", "echo, sleep", "--name", "cli-test", "--concurrency", "2", "--lease", "5s")
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		inst, err := b.client.GetWorkflow(ctx, "w1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusCompleted {
			if out := string(inst.State.Steps["b"].Output); out != `{"slept_ms":50}` {
				t.Errorf("step b output %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not complete the workflow: %s", inst.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	var res cliResult
	select {
	case res = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("flowd worker did not exit after its context was cancelled")
	}
	if res.code != 0 || res.stdout != "" {
		t.Errorf("flowd worker exited %d, stdout %q, stderr:\n%s", res.code, res.stdout, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	var tasks []string
	for _, l := range lines {
		if strings.Contains(l, `msg="task completed"`) {
			tasks = append(tasks, l)
		}
	}
	if len(tasks) != 2 || !strings.Contains(tasks[0], "workflow=w1 step=a handler=echo attempt=1") ||
		!strings.Contains(tasks[1], "workflow=w1 step=b handler=sleep attempt=1") {
		t.Errorf("want one line per task, got:\n%s", res.stderr)
	}
	if !strings.Contains(lines[0], `msg="worker started" name=cli-test handlers=echo,sleep concurrency=2 lease=5s`) ||
		!strings.Contains(lines[len(lines)-1], `msg="worker stopped"`) {
		t.Errorf("start and stop lines:\n%s", res.stderr)
	}
}

// A worker the server refuses (no token) exits 1 at once and says what to do.
func TestCLIWorkerUnauthorized(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, "s3cret")
	res := b.runUntil(make(chan struct{}), "worker", "--handlers", "echo")
	if res.code != exitError || !strings.Contains(res.stderr, "flowd: worker: the server refused to hand out tasks: 401 Unauthorized") ||
		!strings.Contains(res.stderr, "pass --token or set FLOWD_TOKEN") {
		t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// flowd alone is a usage error with the help on stderr; --help is not.
func TestBareFlowdIsAUsageError(t *testing.T) {
	e, out, errOut := testEnv(nil)
	if code := run(context.Background(), nil, e); code != exitUsage || out.String() != "" ||
		!strings.Contains(errOut.String(), "Available Commands") || !strings.Contains(errOut.String(), "flowd: no command given") {
		t.Errorf("flowd: exit %d, stdout %q, stderr %q; want exit %d with the help on stderr", code, out.String(), errOut.String(), exitUsage)
	}
	e, out, errOut = testEnv(nil)
	if code := run(context.Background(), []string{"--help"}, e); code != exitOK || !strings.Contains(out.String(), "Available Commands") || errOut.String() != "" {
		t.Errorf("flowd --help: exit %d, stdout %q, stderr %q; want the help on stdout, exit 0", code, out.String(), errOut.String())
	}
	e, _, errOut = testEnv(nil)
	if code := run(context.Background(), []string{"nope"}, e); code != exitUsage || !strings.Contains(errOut.String(), `unknown command "nope"`) {
		t.Errorf("flowd nope: exit %d, stderr %q", code, errOut.String())
	}
}
