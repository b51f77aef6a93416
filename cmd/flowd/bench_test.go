package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/pgtest"
)

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "never.db")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--scenario", "nope"}, `unknown --scenario "nope" (want one of update, contended, complete-step, batch, workflow, history, foreach, queue, code, code-growth, bulk)`},
		{[]string{"--scenario", "queue", "--backlog", "0"}, "--backlog must be in 1–1000000, got 0"},
		{[]string{"--scenario", "queue", "--backlog", "-1"}, "--backlog must be in 1–1000000, got -1"},
		{[]string{"--scenario", "queue", "--backlog", "1000001"}, "--backlog must be in 1–1000000, got 1000001"},
		{[]string{"--scenario", "queue", "--backlog", "many"}, `invalid argument "many" for "--backlog"`},
		{[]string{"--scenario", "queue", "--workers", "0"}, "--workers must be at least 1, got 0"},
		{[]string{"--items", "0", "--scenario", "foreach"}, "--items must be in 1–10000, got 0"},
		{[]string{"--items", "10001", "--scenario", "foreach"}, "--items must be in 1–10000, got 10001"},
		{[]string{"--workers", "0", "--scenario", "foreach"}, "--workers must be at least 1, got 0"},
		{[]string{"--clients", "0"}, "--clients must be at least 1, got 0"},
		{[]string{"--clients", "-3"}, "--clients must be at least 1, got -3"},
		{[]string{"--duration", "0s"}, "--duration must be positive, got 0s"},
		{[]string{"--duration", "-1s"}, "--duration must be positive"},
		{[]string{"--duration", "soon"}, `invalid argument "soon" for "--duration"`},
		{[]string{"--scenario", "contended", "--mode", "spin"}, `unsupported --mode "spin" for --scenario contended (want modify or retry)`},
		{[]string{"--scenario", "update", "--mode", "retry"}, `unsupported --mode "retry": only --scenario contended has modes`},
		{[]string{"--batch-size", "0", "--scenario", "batch"}, "--batch-size must be in 1–10000"},
		{[]string{"--rows", "0", "--scenario", "batch"}, "--rows must be at least 1, got 0"},
		{[]string{"--workers", "0", "--scenario", "workflow"}, "--workers must be at least 1, got 0"},
		{[]string{"--steps", "0", "--scenario", "complete-step"}, "--steps must be in 1–10000, got 0"},
		{[]string{"--steps", "10001", "--scenario", "code-growth"}, "--steps must be in 1–10000, got 10001"},
		{[]string{"--workers", "0", "--scenario", "code"}, "--workers must be at least 1, got 0"},
		{[]string{"--db", "mysql://localhost/x"}, "unsupported database URL"},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		e, out, errOut := testEnv(nil)
		args := append([]string{"bench", "--db", db}, c.args...)
		if code := run(context.Background(), args, e); code != exitUsage || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("flowd %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(args, " "), code, errOut.String(), exitUsage, c.msg)
		}
		if out.String() != "" {
			t.Errorf("flowd %s printed on stdout: %q", strings.Join(args, " "), out.String())
		}
	}
	// Usage is checked before the database is touched.
	if _, err := os.Stat(filepath.Join(dir, "never.db")); !os.IsNotExist(err) {
		t.Errorf("a refused bench created its database: %v", err)
	}
}

// bench never writes into a database it was not named on its command line:
// not the default sqlite:flowd.db, not FLOWD_DB.
func TestBenchNeedsDB(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fromEnv := filepath.Join(dir, "server.db")
	for _, vars := range []map[string]string{nil, {"FLOWD_DB": "sqlite:" + fromEnv}} {
		for _, args := range [][]string{{"bench"}, {"bench", "--db", ""}, {"bench", "--scenario", "update", "--duration", "1s"}} {
			e, out, errOut := testEnv(vars)
			const msg = "flowd: --db is required: name the database to fill with bench data, e.g. --db sqlite:bench.db (FLOWD_DB is not read"
			if code := run(context.Background(), args, e); code != exitUsage || !strings.HasPrefix(errOut.String(), msg) || out.String() != "" {
				t.Errorf("flowd %s (env %v): exit %d, stdout %q, stderr %q; want exit %d saying %q", strings.Join(args, " "), vars, code, out.String(), errOut.String(), exitUsage, msg)
			}
		}
	}
	if _, err := os.Stat(fromEnv); !os.IsNotExist(err) {
		t.Errorf("bench wrote into the database of FLOWD_DB: %v", err)
	}
	e, _, _ := testEnv(nil)
	if run(context.Background(), []string{"bench", "--help"}, e); !strings.Contains(e.stdout.(*syncBuffer).String(), "FLOWD_DB is not read") {
		t.Errorf("bench --help does not say that FLOWD_DB is not read")
	}
}

func TestBenchPrintsJSONLastLine(t *testing.T) {
	t.Parallel()
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "bench.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, newDB := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The other flags may come from the environment.
			e, out, errOut := testEnv(map[string]string{"FLOWD_CLIENTS": "3"})
			args := []string{"bench", "--db", newDB(t), "--scenario", "contended", "--duration", "1200ms"}
			if code := run(context.Background(), args, e); code != exitOK {
				t.Fatalf("flowd %s: exit %d\nstderr:\n%s", strings.Join(args, " "), code, errOut.String())
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			var got map[string]any
			if err := json.Unmarshal([]byte(last), &got); err != nil {
				t.Fatalf("last stdout line is not JSON: %v\n%s", err, out.String())
			}
			for _, k := range []string{"scenario", "clients", "duration_s", "ops", "ops_per_sec", "p50_ms", "p99_ms", "conflicts", "retries", "errors", "lost_updates"} {
				if _, ok := got[k]; !ok {
					t.Errorf("no %q in %s", k, last)
				}
			}
			if got["scenario"] != "contended" || got["clients"] != 3.0 || got["backend"] != name || got["lost_updates"] != 0.0 || got["errors"] != 0.0 {
				t.Errorf("unexpected result: %s", last)
			}
			if ops, _ := got["ops"].(float64); ops <= 0 {
				t.Errorf("no ops: %s", last)
			}
			if !strings.Contains(errOut.String(), "flowd bench: contended ") || !strings.Contains(errOut.String(), " ops/s=") {
				t.Errorf("no progress line on stderr:\n%s", errOut.String())
			}
		})
	}
}

func TestBenchCPUProfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "bench.db")
	prof := filepath.Join(dir, "cpu.pprof")
	e, out, errOut := testEnv(nil)
	// 20 instances, not the default 1,000: the profile is what is tested,
	// and SQLite under the race detector takes half a minute to write 1,000.
	args := []string{"bench", "--db", db, "--scenario", "update", "--clients", "2", "--instances", "20", "--duration", "300ms", "--cpuprofile", prof}
	if code := run(context.Background(), args, e); code != exitOK {
		t.Fatalf("flowd %s: exit %d\nstderr:\n%s", strings.Join(args, " "), code, errOut.String())
	}
	if !strings.Contains(out.String(), `"scenario":"update"`) {
		t.Errorf("no result line: %s", out.String())
	}
	// A pprof profile is a gzipped protocol buffer.
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("--cpuprofile wrote %d bytes (%v); want a gzipped profile", len(b), err)
	}

	// A path that cannot be written fails before the database is touched.
	never := filepath.Join(dir, "never.db")
	e, out, errOut = testEnv(nil)
	args = []string{"bench", "--db", "sqlite:" + never, "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.pprof")}
	if code := run(context.Background(), args, e); code != exitError || !strings.Contains(errOut.String(), "--cpuprofile: open ") || !strings.Contains(errOut.String(), "no such file or directory") {
		t.Errorf("flowd %s: exit %d, stderr %q; want exit %d naming --cpuprofile", strings.Join(args, " "), code, errOut.String(), exitError)
	}
	if out.String() != "" {
		t.Errorf("a failed bench printed on stdout: %q", out.String())
	}
	if _, err := os.Stat(never); !os.IsNotExist(err) {
		t.Errorf("a bench refused for its profile path created its database: %v", err)
	}
}

// The scenarios with a cost per item print it: the growth of SQLite's
// files for a file, the time alone (after a warning) for a database in
// memory.
func TestBenchCostPerItem(t *testing.T) {
	t.Parallel()
	file := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	for _, c := range []struct {
		db      string
		fields  []string
		missing string
		warning string
	}{
		{file, []string{"ms_per_item", "file_growth_bytes", "file_growth_bytes_per_item"}, "wal_bytes", ""},
		{"sqlite::memory:", []string{"ms_per_item"}, "file_growth_bytes", "flowd bench: warning: not measuring the database's growth: the database's writes are not measured: an in-memory SQLite database has no file"},
	} {
		e, out, errOut := testEnv(nil)
		args := []string{"bench", "--db", c.db, "--scenario", "history", "--steps", "5", "--workers", "2"}
		if code := run(context.Background(), args, e); code != exitOK {
			t.Fatalf("flowd %s: exit %d\nstderr:\n%s", strings.Join(args, " "), code, errOut.String())
		}
		lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
			t.Fatalf("last stdout line is not JSON: %v\n%s", err, out.String())
		}
		for _, k := range c.fields {
			if v, _ := got[k].(float64); v <= 0 {
				t.Errorf("%s: %s is %v, want > 0: %s", c.db, k, got[k], lines[len(lines)-1])
			}
		}
		if _, ok := got[c.missing]; ok {
			t.Errorf("%s: %s in %s", c.db, c.missing, lines[len(lines)-1])
		}
		if !strings.Contains(errOut.String(), c.warning) {
			t.Errorf("%s: stderr lacks %q:\n%s", c.db, c.warning, errOut.String())
		}
	}
}

// --scenario code and code-growth run through the command, with their cost
// per item measured on the database's files: the code scenario's per
// workflow, code-growth's per checkpoint with its early and late pace.
func TestBenchCodeScenarios(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		fields []string
	}{
		{[]string{"--scenario", "code", "--workers", "2", "--duration", "1s"}, []string{"completed", "ms_per_item", "file_growth_bytes_per_item"}},
		{[]string{"--scenario", "bulk", "--rows", "300"}, []string{"ops", "ops_per_sec", "instances"}},
		{[]string{"--scenario", "code-growth", "--steps", "5", "--workers", "1"}, []string{"ms_per_item", "file_growth_bytes_per_item", "checkpoint_ms_first_tenth", "checkpoint_ms_last_tenth", "history_versions"}},
	} {
		t.Run(c.args[1], func(t *testing.T) {
			t.Parallel()
			e, out, errOut := testEnv(nil)
			args := append([]string{"bench", "--db", "sqlite:" + filepath.Join(t.TempDir(), "bench.db")}, c.args...)
			if code := run(context.Background(), args, e); code != exitOK {
				t.Fatalf("flowd %s: exit %d\nstderr:\n%s", strings.Join(args, " "), code, errOut.String())
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			var got map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
				t.Fatalf("last stdout line is not JSON: %v\n%s", err, out.String())
			}
			if got["scenario"] != c.args[1] || got["errors"] != 0.0 || got["lost_updates"] != 0.0 {
				t.Errorf("unexpected result: %s", lines[len(lines)-1])
			}
			for _, k := range c.fields {
				if v, _ := got[k].(float64); v <= 0 {
					t.Errorf("%s is %v, want > 0: %s", k, got[k], lines[len(lines)-1])
				}
			}
		})
	}
}
