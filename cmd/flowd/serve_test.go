package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// syncBuffer collects output written from several goroutines.
type syncBuffer = testkit.SyncBuffer

func testEnv(vars map[string]string) (*env, *syncBuffer, *syncBuffer) {
	out, errOut := &syncBuffer{}, &syncBuffer{}
	return &env{
		stdin:  strings.NewReader(""),
		stdout: out,
		stderr: errOut,
		getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}, out, errOut
}

var urlLine = regexp.MustCompile(`API at (http://[0-9.:]+)/v1`)

// startServe runs the real `flowd serve` in-process on port 0 and returns its
// base URL and a stop function that sends the shutdown signal (cancels the
// context, as SIGTERM does) and returns the exit code.
func startServe(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with the environment variables vars.
func startServeEnv(t *testing.T, vars map[string]string, args ...string) (string, func() int) {
	t.Helper()
	url, _, stop := startServeLogs(t, vars, args...)
	return url, stop
}

// startServeLogs is startServeEnv that also returns what serve writes to
// stderr: its log.
func startServeLogs(t *testing.T, vars map[string]string, args ...string) (string, *syncBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e, out, errOut := testEnv(vars)
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), e) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := urlLine.FindStringSubmatch(out.String()); m != nil {
			stopped := false
			var code int
			stop := func() int {
				if !stopped {
					cancel()
					select {
					case code = <-done:
					case <-time.After(30 * time.Second):
						t.Fatal("serve did not stop within 30s of the shutdown signal")
					}
					stopped = true
				}
				return code
			}
			t.Cleanup(func() { stop() })
			return m[1], errOut, stop
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d before listening; stderr:\n%s", code, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not print its URL; stdout %q stderr:\n%s", out.String(), errOut.String())
		}
	}
}

func TestServeEndToEnd(t *testing.T) {
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, db := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, stop := startServe(t, "--db", db(t))
			get := func(path string) (int, string) {
				res, err := http.Get(url + path)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(b)
			}
			if code, body := get("/healthz"); code != 200 {
				t.Errorf("healthz %d %s", code, body)
			}
			res, err := http.Post(url+"/v1/workflows", "application/json", strings.NewReader(`{"id":"e2e-1"}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 201 || res.Header.Get("ETag") != `"0"` {
				t.Fatalf("create: %d ETag %s", res.StatusCode, res.Header.Get("ETag"))
			}
			code, body := get("/metrics")
			if code != 200 || !strings.Contains(body, `flowd_state_updates_total{op="create",result="ok"} 1`) || !strings.Contains(body, "go_goroutines") {
				t.Errorf("metrics %d lack the create counter or Go collectors:\n%.2000s", code, body)
			}
			// Every documented metric is exported.
			for _, name := range []string{"flowd_state_updates_total", "flowd_update_retries_total", "flowd_update_duration_seconds_bucket",
				`flowd_workflows{status="PENDING"} 1`, `flowd_workflows{status="RUNNING"} 0`, "flowd_tasks_claimed_total", "flowd_tasks_completed_total",
				"flowd_lease_expirations_total", "process_cpu_seconds_total"} {
				if !strings.Contains(body, name) {
					t.Errorf("/metrics lacks %s", name)
				}
			}
			if code := stop(); code != 0 {
				t.Errorf("serve exited %d after the shutdown signal", code)
			}
			if _, err := http.Get(url + "/healthz"); err == nil {
				t.Error("server still answers after shutdown")
			}
		})
	}
}

func TestServeTokens(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("# ops\nt0ken-one\n\n  t0ken-two  \nw0rker-token worker billing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ := startServe(t, "--db", "sqlite::memory:", "--token-file", tokenFile, "--metrics-token-required")
	for _, c := range []struct {
		method, path, tok string
		want              int
	}{
		{"GET", "/v1/workflows", "", 401},
		{"GET", "/v1/workflows", "nope", 401},
		{"GET", "/v1/workflows", "t0ken-one", 200},
		{"GET", "/v1/workflows", "t0ken-two", 200},
		// A worker's token polls for tasks and reads definitions, and may
		// not store a definition (a program the server runs).
		{"GET", "/v1/definitions", "w0rker-token", 200},
		{"PUT", "/v1/definitions/d", "w0rker-token", 403},
		{"GET", "/v1/workflows", "w0rker-token", 403},
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", "w0rker-token", 200},
		{"GET", "/healthz", "", 200},
	} {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(`{}`))
		if c.tok != "" {
			req.Header.Set("Authorization", "Bearer "+c.tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s %s with token %q: %d %s, want %d", c.method, c.path, c.tok, res.StatusCode, body, c.want)
		}
	}
}

// --allowed-hosts (comma-separated or repeated, or FLOWD_ALLOWED_HOSTS) admits
// its names; other Host values get 421.
func TestServeAllowedHosts(t *testing.T) {
	url, _ := startServe(t, "--db", "sqlite::memory:", "--allowed-hosts", "a.example,b.example:8443", "--allowed-hosts", "c.example")
	hostStatus := func(host string) int {
		req, _ := http.NewRequest("GET", url+"/v1/workflows", nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for host, want := range map[string]int{
		"a.example": 200, "a.example:9000": 200, "b.example:8443": 200, "b.example": 421, "c.example": 200,
		"evil.example": 421, "localhost": 200, strings.TrimPrefix(url, "http://"): 200,
	} {
		if got := hostStatus(host); got != want {
			t.Errorf("Host %s: %d, want %d", host, got, want)
		}
	}
}

func TestServeAllowedHostsFromEnv(t *testing.T) {
	url, stop := startServeEnv(t, map[string]string{"FLOWD_ALLOWED_HOSTS": "env.example"}, "--db", "sqlite::memory:")
	req, _ := http.NewRequest("GET", url+"/healthz", nil)
	req.Host = "env.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("Host env.example with FLOWD_ALLOWED_HOSTS=env.example: %d", res.StatusCode)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n# nothing\n"), 0o600)
	badRole := filepath.Join(dir, "bad-role")
	os.WriteFile(badRole, []byte("# ops\ngood-token operator ops\nsecret-token superuser\n"), 0o600)
	tooMany := filepath.Join(dir, "too-many")
	os.WriteFile(tooMany, []byte("t0ken reader a b\n"), 0o600)
	cases := []struct {
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, nil, exitUsage, "refusing to listen on non-loopback address"},
		{nil, map[string]string{"FLOWD_ADDR": "0.0.0.0:0"}, exitUsage, "refusing to listen on non-loopback address"},
		{[]string{"--addr", "nonsense"}, nil, exitUsage, "--addr"},
		{[]string{"--db", "mysql://x"}, nil, exitError, "unsupported database URL"},
		{[]string{"--db", "sqlite::memory:", "--token-file", empty}, nil, exitError, "holds no token"},
		{[]string{"--db", "sqlite::memory:", "--token-file", filepath.Join(dir, "missing")}, nil, exitError, "reading token file"},
		{[]string{"--db", "sqlite::memory:", "--token-file", badRole}, nil, exitError, "token file " + badRole + ": line 3: the second field is not a role: write admin, operator, worker or reader"},
		{[]string{"--db", "sqlite::memory:", "--token-file", tooMany}, nil, exitError, "token file " + tooMany + ": line 1: 4 fields; a line is TOKEN, or TOKEN ROLE [NAME]"},
		{[]string{"--metrics-token-required"}, nil, exitUsage, "--metrics-token-required needs --token-file"},
		{[]string{"--db-wait", "-1s"}, nil, exitUsage, "--db-wait must not be negative"},
		{[]string{"--lease", "0s"}, nil, exitUsage, "--lease must be positive"},
		{[]string{"--schedule-interval", "0s"}, nil, exitUsage, "--schedule-interval must be positive, got 0s"},
		{nil, map[string]string{"FLOWD_SCHEDULE_INTERVAL": "-1s"}, exitUsage, "--schedule-interval must be positive, got -1s"},
		{nil, map[string]string{"FLOWD_SCHEDULE_INTERVAL": "often"}, exitUsage, "FLOWD_SCHEDULE_INTERVAL"},
		{[]string{"--max-state-bytes", "0"}, nil, exitUsage, "--max-state-bytes must be positive, got 0"},
		{[]string{"--max-state-bytes", "-5"}, nil, exitUsage, "--max-state-bytes must be positive, got -5"},
		{nil, map[string]string{"FLOWD_MAX_STATE_BYTES": "0"}, exitUsage, "--max-state-bytes must be positive"},
		{nil, map[string]string{"FLOWD_MAX_STATE_BYTES": "4MiB"}, exitUsage, "FLOWD_MAX_STATE_BYTES"},
		{[]string{"--retention", "-1h"}, nil, exitUsage, "--retention must not be negative (0 keeps finished workflows for ever), got -1h0m0s"},
		{nil, map[string]string{"FLOWD_RETENTION": "-5m"}, exitUsage, "--retention must not be negative"},
		{[]string{"--retention", "30d"}, nil, exitUsage, `"30d" is not a duration: write days in hours, e.g. 720h for 30 days`},
		{[]string{"--retention", "soon"}, nil, exitUsage, `"soon" is not a duration such as 720h or 90m`},
		{nil, map[string]string{"FLOWD_RETENTION": "30d"}, exitUsage, `FLOWD_RETENTION="30d": "30d" is not a duration: write days in hours`},
		{[]string{"--event-retention", "0s"}, nil, exitUsage, "--event-retention must be positive, got 0s"},
		{nil, map[string]string{"FLOWD_EVENT_RETENTION": "-1h"}, exitUsage, "--event-retention must be positive, got -1h0m0s"},
		{[]string{"--event-retention", "7d"}, nil, exitUsage, `"7d" is not a duration: write days in hours`},
		{[]string{"--max-versions", "0"}, nil, exitUsage, "--max-versions must be positive, got 0"},
		{nil, map[string]string{"FLOWD_MAX_VERSIONS": "-3"}, exitUsage, "--max-versions must be positive, got -3"},
		{nil, map[string]string{"FLOWD_MAX_VERSIONS": "lots"}, exitUsage, "FLOWD_MAX_VERSIONS"},
		{[]string{"--max-descendants", "0"}, nil, exitUsage, "--max-descendants must be between 1 and 2147483647, got 0"},
		{nil, map[string]string{"FLOWD_MAX_DESCENDANTS": "3000000000"}, exitUsage, "--max-descendants must be between 1 and 2147483647, got 3000000000"},
		{[]string{"--log-level", "loud"}, nil, exitUsage, "--log-level"},
		{[]string{"--bogus"}, nil, exitUsage, "unknown flag"},
		{nil, map[string]string{"FLOWD_WORKERS": "many"}, exitUsage, "FLOWD_WORKERS"},
		{[]string{"--allowed-hosts", "https://flowd.example.com"}, nil, exitUsage, `--allowed-hosts: allowed host "https://flowd.example.com"`},
		{nil, map[string]string{"FLOWD_ALLOWED_HOSTS": "ok.example,flowd.example.com:http"}, exitUsage, `allowed host "flowd.example.com:http": port "http"`},
		{[]string{"--outbound-allow", "10.0.0.0/33"}, nil, exitUsage, `--outbound-allow: "10.0.0.0/33" is not a CIDR such as 10.0.0.0/8 or fd00::/8`},
		{[]string{"--outbound-allow", "10.0.0.1", "--outbound-allow", "http://api.internal"}, nil, exitUsage, `--outbound-allow: "http://api.internal" is a URL; give a CIDR, HOST or HOST:PORT`},
		{nil, map[string]string{"FLOWD_OUTBOUND_ALLOW": "10.0.0.1,*.example.com"}, exitUsage, `--outbound-allow: "*.example.com": wildcards are not supported; "*" alone opens every address, else name each host or CIDR`},
		{nil, map[string]string{"FLOWD_OUTBOUND_ALLOW": "api.internal:https"}, exitUsage, `--outbound-allow: "api.internal:https": the port must be a number from 1 to 65535`},
	}
	for _, c := range cases {
		e, _, errOut := testEnv(c.env)
		code := run(context.Background(), append([]string{"serve"}, c.args...), e)
		if code != c.code || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("serve %v (env %v): exit %d, stderr %q; want exit %d mentioning %q", c.args, c.env, code, errOut.String(), c.code, c.msg)
		}
	}
}

func TestMigrateCommand(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "m.db")
	e, out, errOut := testEnv(map[string]string{"FLOWD_DB": db})
	if code := run(context.Background(), []string{"migrate"}, e); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "applied 00001_init.sql") || !strings.Contains(out.String(), "applied 00002_engine.sql") ||
		!strings.Contains(out.String(), "applied 00003_workers.sql") || !strings.Contains(out.String(), "applied 00004_idempotency_keys.sql") ||
		!strings.Contains(out.String(), "applied 00005_delete.sql") || !strings.Contains(out.String(), "applied 00006_history_patches.go") ||
		!strings.Contains(out.String(), "applied 00010_child_workflows.sql") || !strings.Contains(out.String(), "applied 00011_definition_concurrency.go") ||
		!strings.Contains(out.String(), "applied 00012_task_flow_control.sql") ||
		!strings.Contains(out.String(), "applied 00013_schedules.sql") || !strings.Contains(out.String(), "applied 00014_traceparent.sql") ||
		!strings.Contains(out.String(), "applied 00015_history_actor.sql") || !strings.Contains(out.String(), "applied 00016_runaway_limits.sql") ||
		!strings.Contains(out.String(), "applied 00017_concurrency_slots.sql") || !strings.Contains(out.String(), "applied 00018_orphan_tasks.sql") ||
		!strings.Contains(out.String(), "applied 00019_task_concurrency_rows.sql") || !strings.Contains(out.String(), "applied 00020_held_tasks.sql") || !strings.Contains(out.String(), "applied 00021_attempt_timeout.sql") || !strings.Contains(out.String(), "applied 00022_claim_order.sql") || !strings.Contains(out.String(), "applied 00023_step_records.sql") || !strings.Contains(out.String(), "applied 00024_iteration_outputs.sql") ||
		!strings.Contains(out.String(), "applied 00025_search_attributes.sql") || !strings.Contains(out.String(), "applied 00026_rerun_of.sql") || !strings.Contains(out.String(), "applied 00027_bulk_operations.sql") ||
		!strings.Contains(out.String(), "is now at version 27") {
		t.Errorf("first migrate output:\n%s", out.String())
	}
	e, out, _ = testEnv(nil)
	if code := run(context.Background(), []string{"migrate", "--db", db, "-o", "json"}, e); code != 0 {
		t.Fatal("second migrate failed")
	}
	if got := strings.TrimSpace(out.String()); !strings.Contains(got, `"applied":[]`) || !strings.Contains(got, `"version":27`) {
		t.Errorf("second migrate JSON: %s", got)
	}
	e, _, errOut = testEnv(nil)
	if code := run(context.Background(), []string{"migrate", "--db", "postgres://127.0.0.1:1/nope?connect_timeout=2"}, e); code != exitError || errOut.String() == "" {
		t.Errorf("migrate against a dead server: exit %d, %q", code, errOut.String())
	}
}

// TestServeDemo: --demo loads the examples into an empty database and the
// in-process demo handlers move them; a restart does not load them twice.
func TestServeDemo(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	url, stop := startServe(t, "--db", db, "--demo")
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(url + "/v1/workflows?definition=fanout")
		if err != nil {
			t.Fatal(err)
		}
		var fan struct{ Workflows []struct{ Status string } }
		err = json.NewDecoder(res.Body).Decode(&fan)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(fan.Workflows) == 1 && fan.Workflows[0].Status == "COMPLETED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo fan-out never completed: %+v", fan)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// --demo opens loopback: the demo's http step dials 127.0.0.1:9999,
	// where nothing listens, and is retried (it is not refused).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		page, err := client.New(url).ListWorkflows(context.Background(), client.ListOptions{Definition: "http-retry"})
		if err != nil || len(page.Workflows) != 1 {
			t.Fatalf("http-retry workflows: %+v, %v", page, err)
		}
		if step := page.Workflows[0].State.Steps["call-hook"]; step != nil && step.Error != "" {
			if !strings.Contains(step.Error, "connection refused") || strings.Contains(step.Error, "outbound call refused") {
				t.Errorf("the demo's http step failed with %q, want a connection refused by 127.0.0.1:9999", step.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo's http step never ran")
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	url, _ = startServe(t, "--db", db, "--demo")
	res, err := http.Get(url + "/v1/workflows?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page struct{ Workflows []any }
	json.NewDecoder(res.Body).Decode(&page)
	if len(page.Workflows) != 4 {
		t.Errorf("after a restart with --demo: %d workflows, want the 4 of one demo", len(page.Workflows))
	}
}

// TestDemoCommand: flowd demo against a server with the demo handlers.
func TestDemoCommand(t *testing.T) {
	url, _ := startServe(t, "--db", "sqlite::memory:", "--demo-handlers")
	e, out, errOut := testEnv(map[string]string{"FLOWD_SERVER": url})
	if code := run(context.Background(), []string{"demo"}, e); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errOut.String())
	}
	if got := strings.Count(out.String(), "started "); got != 4 || !strings.Contains(out.String(), "applied order.yaml") {
		t.Errorf("demo output:\n%s", out.String())
	}
	e, _, errOut = testEnv(map[string]string{"FLOWD_SERVER": "http://127.0.0.1:1"})
	if code := run(context.Background(), []string{"demo"}, e); code != exitError || !strings.Contains(errOut.String(), "cannot reach the flowd server") {
		t.Errorf("demo without a server: exit %d: %s", code, errOut.String())
	}
}

// --max-state-bytes reaches the API: a create whose state passes it is a 413.
// Without the flag the limit is the engine's default, which the API suite's
// StateLimit case checks in depth through httpapi (growing a state past 4 MiB
// takes minutes on SQLite under -race, so it does not run again here).
func TestServeMaxStateBytes(t *testing.T) {
	e, out, _ := testEnv(nil)
	if code := run(context.Background(), []string{"serve", "--help"}, e); code != 0 || !strings.Contains(out.String(), "(env FLOWD_MAX_STATE_BYTES) (default "+strconv.Itoa(engine.DefaultMaxStateBytes)+")") {
		t.Errorf("serve --help: exit %d; want --max-state-bytes to default to the engine's %d:\n%s", code, engine.DefaultMaxStateBytes, out)
	}

	url, _ := startServe(t, "--db", "sqlite:"+filepath.Join(t.TempDir(), "f.db"), "--max-state-bytes", "100")
	post := func(state string) int {
		t.Helper()
		res, err := http.Post(url+"/v1/workflows", "application/json", strings.NewReader(`{"state":`+state+`}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post(`{"v":"` + strings.Repeat("x", 100) + `"}`); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 130-byte state with --max-state-bytes 100: %d, want 413", code)
	}
	if code := post(`{"v":"x"}`); code != http.StatusCreated {
		t.Errorf("a small state: %d, want 201", code)
	}
}
