package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/workflow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forEachDB runs fn as a parallel subtest per store, on a fresh database.
func forEachDB(t *testing.T, fn func(t *testing.T, db string)) {
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, newDB := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newDB(t))
		})
	}
}

// start opens, registers and starts a server on db; it is closed at the end
// of the test.
func start(t *testing.T, cfg server.Config, handlers map[string]engine.Handler) *server.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	registerAndStart(t, s, handlers)
	return s
}

// registerAndStart registers the handlers on s and starts it.
func registerAndStart(t *testing.T, s *server.Server, handlers map[string]engine.Handler) {
	t.Helper()
	for name, h := range handlers {
		if err := s.Register(name, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// slow runs for d unless its context ends; it counts runs and reports starts.
func slow(d time.Duration, runs *atomic.Int32, started chan<- string) engine.Handler {
	return func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
		runs.Add(1)
		started <- t.WorkflowID
		select {
		case <-time.After(d):
			return json.RawMessage(`{"done": true}`), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

const slowDef = `{"name": "slow", "steps": [{"id": "a", "type": "task", "handler": "slow"}]}`

func startSlow(t *testing.T, c *httpapi.Client) *workflow.Instance {
	t.Helper()
	ctx := context.Background()
	if _, _, err := c.PutDefinition(ctx, "slow", []byte(slowDef)); err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{Definition: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// A shutdown while a step runs and remote workers long-poll: the polls end at
// once with no task, the step finishes and is recorded once, Shutdown is nil.
func TestShutdownIsGraceful(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		var runs atomic.Int32
		started := make(chan string, 4)
		s := start(t, server.Config{DB: db, Lease: time.Minute}, map[string]engine.Handler{
			"slow": slow(2*time.Second, &runs, started),
		})
		c := s.Client()
		inst := startSlow(t, c)
		<-started

		const polls = 21
		var wg sync.WaitGroup
		errs := make(chan error, polls)
		for i := range polls {
			wg.Go(func() {
				wait := 60.0
				task, err := c.PollTask(context.Background(), httpapi.PollRequest{Worker: "w" + string(rune('a'+i)), Handlers: []string{"elsewhere"}, WaitSeconds: &wait})
				if err == nil && task != nil {
					err = errors.New("a poll got a task")
				}
				errs <- err
			})
		}
		waitForPollers(t, c, polls)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shutdown := make(chan error, 1)
		go func() { shutdown <- s.Shutdown(ctx) }()
		pollsDone := make(chan struct{})
		go func() { wg.Wait(); close(pollsDone) }()
		select {
		case <-pollsDone:
		case <-time.After(20 * time.Second):
			t.Fatal("long polls of 60 s were still waiting after the shutdown began")
		}
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("long poll during shutdown: %v, want 204 (no task, no error)", err)
			}
		}
		if err := <-shutdown; err != nil {
			t.Fatalf("Shutdown = %v, want nil", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close after Shutdown = %v, want the shutdown's nil", err)
		}

		// Read what was recorded through a fresh server without workers.
		zero := 0
		after := start(t, server.Config{DB: db, Workers: &zero}, nil)
		got, err := after.Client().GetWorkflow(context.Background(), inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		a := got.State.Steps["a"]
		if got.Status != workflow.StatusCompleted || a == nil || a.Attempts != 1 || string(a.Output) != `{"done":true}` {
			t.Fatalf("after shutdown: %s, step a %+v; want COMPLETED after 1 attempt", got.Status, a)
		}
		if r := runs.Load(); r != 1 {
			t.Fatalf("the step ran %d times, want 1", r)
		}
	})
}

// A shutdown timeout shorter than the step: the handler is cancelled and the
// task released, claimable at once by another node.
func TestShutdownTimeoutReleasesTheStep(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		var runs atomic.Int32
		started := make(chan string, 4)
		s := start(t, server.Config{DB: db, Lease: time.Hour}, map[string]engine.Handler{
			"slow": slow(time.Hour, &runs, started),
		})
		inst := startSlow(t, s.Client())
		<-started

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := s.Shutdown(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "cancelled and their tasks released") {
			t.Fatalf("Shutdown past its deadline = %v, want the released steps reported", err)
		}

		zero := 0
		other := start(t, server.Config{DB: db, Workers: &zero}, nil)
		task, err := other.Client().PollTask(context.Background(), httpapi.PollRequest{Worker: "w", Handlers: []string{"slow"}})
		if err != nil || task == nil {
			t.Fatalf("the released task is not claimable at once (lease of an hour): %+v, %v", task, err)
		}
		if task.WorkflowID != inst.ID || task.Step != "a" {
			t.Fatalf("polled %+v, want step a of %s", task, inst.ID)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	neg := -1
	for _, tc := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{Workers: &neg}, "server: Workers must not be negative, got -1"},
		{server.Config{Lease: -time.Second}, "server: Lease must not be negative, got -1s"},
		{server.Config{ScheduleInterval: -time.Second}, "server: ScheduleInterval must not be negative, got -1s"},
		{server.Config{ShutdownTimeout: -time.Second}, "server: ShutdownTimeout must not be negative, got -1s"},
		{server.Config{Retention: -time.Hour}, "server: Retention must not be negative, got -1h0m0s"},
		{server.Config{Addr: "8080"}, `server: Addr "8080": address 8080: missing port in address (want host:port, e.g. 127.0.0.1:8080)`},
		{server.Config{Addr: "0.0.0.0:8080"}, "server: refusing to listen on non-loopback address 0.0.0.0:8080 without authentication: set Tokens, or Insecure to accept the risk"},
		{server.Config{DB: "mysql://x"}, "unsupported database URL"},
	} {
		s, err := server.New(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, %v; want error %q", tc.cfg, s, err, tc.want)
		}
	}
}

func TestStartTwiceAndLateRegister(t *testing.T) {
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")}, nil)
	if err := s.Start(context.Background()); !errors.Is(err, server.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	err := s.Register("late", func(context.Context, engine.Task) (json.RawMessage, error) { return nil, nil })
	if !errors.Is(err, server.ErrStarted) || err.Error() != `server: already started: register handler "late" before Start` {
		t.Errorf("Register after Start = %v", err)
	}
	if err := s.Client().Healthz(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, server.ErrStarted) {
		t.Errorf("Start after Close = %v", err)
	}
}

// Close right after a request was answered has nothing to report: the
// keep-alive connection is not a request still running, even before net/http
// marks it idle.
func TestCloseAfterAnsweredRequest(t *testing.T) {
	for range 20 {
		s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")}, nil)
		if err := s.Client().Healthz(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
	}
}

// Close while a handler is reading a request body reports that request as
// cut off.
func TestCloseCutsOffRunningRequest(t *testing.T) {
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db")}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server answers "100 Continue" when the handler starts reading the
	// body, which the client never sends.
	fmt.Fprint(conn, "POST /v1/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "100 Continue") {
		t.Fatalf("status line = %q, %v; want 100 Continue", status, err)
	}
	err = s.Close()
	if err == nil || !strings.Contains(err.Error(), "server: 1 requests still running at the shutdown deadline were cut off") {
		t.Fatalf("Close = %v, want the running request reported", err)
	}
}

// Tokens: the server's own client authenticates; others get 401.
func TestTokens(t *testing.T) {
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Tokens: httpapi.AdminTokens("s3cret")}, nil)
	if _, err := s.Client().ListWorkflows(context.Background(), httpapi.ListOptions{}); err != nil {
		t.Fatalf("the server's client: %v", err)
	}
	_, err := httpapi.NewClient(s.URL()).ListWorkflows(context.Background(), httpapi.ListOptions{})
	if !errors.Is(err, httpapi.ErrUnauthorized) {
		t.Fatalf("without a token: %v, want 401", err)
	}
	// /metrics is outside /v1: no token needed; the store is instrumented.
	text, err := httpapi.NewClient(s.URL()).Metrics(context.Background())
	if err != nil || !strings.Contains(text, "flowd_workflows{") {
		t.Fatalf("Metrics = %.300q, %v; want the Prometheus text with flowd_workflows", text, err)
	}
}

// waitForPollers waits until n remote workers are listed: each poll records
// its worker before it waits, so they are all inside the server then (a
// fixed sleep lost polls to a loaded machine: they arrived after the
// shutdown closed the listener).
func waitForPollers(t *testing.T, c *httpapi.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ws, err := c.ListWorkers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		remote := 0
		for _, w := range ws {
			if len(w.Handlers) == 1 && w.Handlers[0] == "elsewhere" {
				remote++
			}
		}
		if remote >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d long polls reached the server in 20 s", remote, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
