package examples

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

// codeExample builds the example program in dir and runs it, as a user
// would, against a fresh server whose one in-process worker serves only
// the server's own timers. It waits until the program has put the code
// definition def, and returns the server's client and a stop function
// that ends the program with SIGTERM, checks that it exits 0 and returns
// what it printed on stdout.
func codeExample(t *testing.T, dir, def string) (*client.Client, func() string) {
	t.Helper()
	bin := build(t, dir)
	ctx := context.Background()
	one := 1
	srv, err := server.New(ctx, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Addr: "127.0.0.1:0",
		Workers: &one, SweepInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "FLOWD_SERVER="+srv.URL())
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	c := srv.Client()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.GetDefinition(ctx, def, 0); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("%s exited with %v before putting definition %s; stderr:\n%s", dir, err, def, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never put definition %s; stderr:\n%s", dir, def, stderr.String())
		}
	}
	stop := func() string {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("%s exited with %v after SIGTERM, want 0; stderr:\n%s", dir, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop after SIGTERM", dir)
		}
		return stdout.String()
	}
	return c, stop
}

// syncBuffer is a strings.Builder a process and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sideEffects counts the lines of out that end with "(key K)", by K: the
// calls the example's stand-in services got.
func sideEffects(out string) map[string]int {
	n := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)\(key (\S+)\)$`).FindAllStringSubmatch(out, -1) {
		n[m[1]]++
	}
	return n
}

// startCode starts workflow id of definition def with input.
func startCode(t *testing.T, c *client.Client, def, id, input string) {
	t.Helper()
	if _, err := c.CreateWorkflow(context.Background(), api.CreateWorkflowRequest{ID: id, Definition: def, Input: json.RawMessage(input)}); err != nil {
		t.Fatal(err)
	}
}

// stopped says inst no longer runs: it completed, or failed, or ….
func stopped(inst *workflow.Instance) bool {
	return inst.Status != workflow.StatusRunning && inst.Status != workflow.StatusPending
}

// stepsInOrder is the recorded entries of a code workflow's state, as
// "name STATUS", in the order they were recorded (their seq).
func stepsInOrder(t *testing.T, inst *workflow.Instance) []string {
	t.Helper()
	bySeq := map[int]string{}
	for name, st := range inst.State.Steps {
		var seq int
		if err := json.Unmarshal(st.Extra["seq"], &seq); err != nil || seq <= 0 {
			t.Fatalf("%s: step %s has no seq: %s", inst.ID, name, st.Extra["seq"])
		}
		bySeq[seq] = name + " " + string(st.Status)
	}
	out := make([]string, 0, len(bySeq))
	for i := 1; i <= len(bySeq); i++ {
		out = append(out, bySeq[i])
	}
	return out
}

// examples/code-saga end to end: an order that ships completes "shipped";
// one whose shipping fails for good runs its compensations in reverse order
// (refund, then release) and completes "compensated". Every service call
// happens once.
func TestCodeSagaExample(t *testing.T) {
	t.Parallel()
	c, stop := codeExample(t, "code-saga", "order-saga")
	startCode(t, c, "order-saga", "o-1", `{"id": "o-1", "sku": "A-1", "quantity": 2, "amount": 4200, "country": "PT"}`)
	startCode(t, c, "order-saga", "o-2", `{"id": "o-2", "sku": "A-1", "quantity": 1, "amount": 2100, "country": "AQ"}`)
	shipped := waitFor(t, c, "o-1", stopped)
	compensated := waitFor(t, c, "o-2", stopped)
	out := stop()

	if shipped.Status != workflow.StatusCompleted {
		t.Fatalf("o-1 is %s, want COMPLETED; steps %+v", shipped.Status, shipped.State.Steps)
	}
	if got, want := string(shipped.Output), `{"order":"o-1","status":"shipped","reservation":"res-o-1/reserve","charge":"ch-o-1/charge","shipment":"shp-o-1/ship"}`; got != want {
		t.Errorf("o-1 output = %s, want %s", got, want)
	}
	if got, want := strings.Join(stepsInOrder(t, shipped), ", "), "reserve COMPLETED, charge COMPLETED, ship COMPLETED"; got != want {
		t.Errorf("o-1 recorded %s, want %s", got, want)
	}

	if compensated.Status != workflow.StatusCompleted {
		t.Fatalf("o-2 is %s, want COMPLETED; steps %+v", compensated.Status, compensated.State.Steps)
	}
	if got, want := string(compensated.Output), `{"order":"o-2","status":"compensated","reservation":"res-o-2/reserve","charge":"ch-o-2/charge","reason":"no carrier delivers to AQ"}`; got != want {
		t.Errorf("o-2 output = %s, want %s", got, want)
	}
	if got, want := strings.Join(stepsInOrder(t, compensated), ", "), "reserve COMPLETED, charge COMPLETED, ship FAILED, refund COMPLETED, release COMPLETED"; got != want {
		t.Errorf("o-2 recorded %s, want %s", got, want)
	}
	if ship := compensated.State.Steps["ship"]; ship.Error != "no carrier delivers to AQ" || ship.Attempts != 1 {
		t.Errorf("o-2 ship: error %q after %d attempts, want the carrier's error after 1 (permanent: no retry)", ship.Error, ship.Attempts)
	}

	calls := sideEffects(out)
	want := map[string]int{"o-1/reserve": 1, "o-1/charge": 1, "o-1/ship": 1,
		"o-2/reserve": 1, "o-2/charge": 1, "o-2/ship": 1, "o-2/refund": 1, "o-2/release": 1}
	for key, n := range want {
		if calls[key] != n {
			t.Errorf("service calls with key %s: %d, want %d", key, calls[key], n)
		}
	}
	if len(calls) != len(want) {
		t.Errorf("service calls %v, want exactly %v; stdout:\n%s", calls, want, out)
	}
	// The other workflow's lines may come between them: only the order counts.
	refund, release := strings.Index(out, "refund ch-o-2/charge (key o-2/refund)\n"), strings.Index(out, "release res-o-2/reserve (key o-2/release)\n")
	if refund < 0 || release < refund {
		t.Errorf("the compensations did not run refund then release; stdout:\n%s", out)
	}
}

// examples/code-sleep-event end to end: the workflow sleeps, reminds,
// waits for its payment event and completes with it, over three runs whose
// replays call no mail twice. A payment published while a workflow still
// sleeps is taken when its wait begins.
func TestCodeSleepEventExample(t *testing.T) {
	t.Parallel()
	c, stop := codeExample(t, "code-sleep-event", "invoice")
	ctx := context.Background()
	startCode(t, c, "invoice", "inv-o-7", `{"order": "o-7", "amount": 4200, "remind_after": "300ms"}`)
	startCode(t, c, "invoice", "inv-o-8", `{"order": "o-8", "amount": 900, "remind_after": "1s"}`)

	// o-8 pays while it still sleeps: nobody waits for the payment yet.
	waitFor(t, c, "inv-o-8", func(inst *workflow.Instance) bool {
		st := inst.State.Steps["grace"]
		return st != nil && st.Status == workflow.StepWaiting
	})
	pub, err := c.PublishEvent(ctx, "payment", "o-8", json.RawMessage(`{"amount": 900, "method": "transfer"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.Delivered) != 0 {
		t.Errorf("early payment delivered to %v, want nobody waiting yet", pub.Delivered)
	}

	// o-7 sleeps, reminds, then waits; its payment completes the wait.
	waiting := waitFor(t, c, "inv-o-7", func(inst *workflow.Instance) bool {
		st := inst.State.Steps["payment"]
		return st != nil && st.Status == workflow.StepWaiting
	})
	// The two reminders run in parallel: recorded in either order.
	timeline := strings.Join(stepsInOrder(t, waiting), ", ")
	timeline = regexp.MustCompile(`remind-by-(mail|sms)`).ReplaceAllString(timeline, "remind-by-*")
	if got, want := timeline, "flowd:now COMPLETED, send-invoice COMPLETED, grace COMPLETED, remind-by-* COMPLETED, remind-by-* COMPLETED, payment WAITING"; got != want {
		t.Errorf("inv-o-7 recorded %s before its payment, want %s", got, want)
	}
	pub, err = c.PublishEvent(ctx, "payment", "o-7", json.RawMessage(`{"amount": 4200, "method": "card"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.Delivered) != 1 || pub.Delivered[0] != "inv-o-7" {
		t.Errorf("payment of o-7 delivered to %v, want [inv-o-7]", pub.Delivered)
	}

	done := map[string]*workflow.Instance{}
	for _, id := range []string{"inv-o-7", "inv-o-8"} {
		done[id] = waitFor(t, c, id, stopped)
	}
	out := stop()
	for id, want := range map[string]struct {
		paid   int
		method string
	}{"inv-o-7": {4200, "card"}, "inv-o-8": {900, "transfer"}} {
		inst := done[id]
		if inst.Status != workflow.StatusCompleted {
			t.Fatalf("%s is %s, want COMPLETED; state.code %s", id, inst.Status, inst.State.Extra["code"])
		}
		var got struct {
			Order      string    `json:"order"`
			Paid       int       `json:"paid"`
			Method     string    `json:"method"`
			InvoicedAt time.Time `json:"invoiced_at"`
		}
		if err := json.Unmarshal(inst.Output, &got); err != nil {
			t.Fatal(err)
		}
		var now time.Time
		if err := json.Unmarshal(inst.State.Steps["flowd:now"].Output, &now); err != nil {
			t.Fatal(err)
		}
		if got.Order != strings.TrimPrefix(id, "inv-") || got.Paid != want.paid || got.Method != want.method || !got.InvoicedAt.Equal(now) {
			t.Errorf("%s output = %s, want paid %d by %s, invoiced_at the recorded flowd:now %s", id, inst.Output, want.paid, want.method, now)
		}
		// Three runs: to the sleep, to the wait, to the end.
		var runs struct {
			Run     int  `json:"run"`
			Waiting bool `json:"waiting"`
		}
		if err := json.Unmarshal(inst.State.Extra["code"], &runs); err != nil || runs.Run != 3 || runs.Waiting {
			t.Errorf("%s: state.code = %s, want run 3, not waiting", id, inst.State.Extra["code"])
		}
	}

	calls := sideEffects(out)
	for _, order := range []string{"o-7", "o-8"} {
		for _, step := range []string{"send-invoice", "remind-by-mail", "remind-by-sms", "send-receipt"} {
			if key := "inv-" + order + "/" + step; calls[key] != 1 {
				t.Errorf("messages with key %s: %d, want 1; stdout:\n%s", key, calls[key], out)
			}
		}
	}
	if len(calls) != 8 {
		t.Errorf("messages %v, want 8 (four a workflow)", calls)
	}
}

// Every Go snippet of docs/code-workflows.md runs as written: each is
// marked either as copied from an example's file, and must appear in it
// verbatim, or as a complete program, which must build.
func TestCodeGuideSnippets(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../docs/code-workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)(?:<!-- ([^\n]*?) -->\n)?```go\n(.*?)```\n").FindAllStringSubmatch(string(guide), -1)
	copied, programs := 0, 0
	for _, b := range blocks {
		marker, code := b[1], b[2]
		switch from, ok := strings.CutPrefix(marker, "from examples/"); {
		case ok:
			src, err := os.ReadFile(from)
			if err != nil {
				t.Fatalf("snippet marked %q: %v", marker, err)
			}
			if !strings.Contains(string(src), code) {
				t.Errorf("this snippet of the guide is not in examples/%s as written:\n%s", from, code)
			}
			copied++
		case marker == "a complete program: examples/code_test.go builds it":
			// Inside the module, so that it builds against this checkout;
			// "_" keeps the go tool's ./... patterns off it.
			dir, err := os.MkdirTemp(".", "_guide-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
			build(t, filepath.Base(dir))
			programs++
		default:
			t.Errorf("a Go snippet of the guide says neither where it comes from nor that it is a complete program (marker %q):\n%s", marker, code)
		}
	}
	if copied < 4 || programs != 1 {
		t.Errorf("found %d snippets copied from the examples and %d complete programs, want at least 4 and 1", copied, programs)
	}
}
