package pgtest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryInt(t *testing.T, conn *pgx.Conn, sql string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

const userRelations = `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`

func TestNewDatabase(t *testing.T) {
	urlA, urlB := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if urlA == urlB {
		t.Fatalf("two NewDatabase calls returned the same URL %s", urlA)
	}
	a, b := connect(t, urlA), connect(t, urlB)

	var nameA, nameB string
	if err := a.QueryRow(t.Context(), "SELECT current_database()").Scan(&nameA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(t.Context(), "SELECT current_database()").Scan(&nameB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB || !strings.HasPrefix(nameA, "flowd_test_") {
		t.Fatalf("database names %q and %q: want distinct flowd_test_* names", nameA, nameB)
	}

	for _, conn := range []*pgx.Conn{a, b} {
		if n := queryInt(t, conn, "SELECT 1"); n != 1 {
			t.Fatalf("SELECT 1 = %d", n)
		}
		if n := queryInt(t, conn, userRelations); n != 0 {
			t.Fatalf("fresh database has %d user relations, want 0", n)
		}
	}

	// A table in one database is invisible in the other.
	if _, err := a.Exec(t.Context(), "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, b, userRelations); n != 0 {
		t.Fatalf("table created in %s is visible in %s", nameA, nameB)
	}
}

func TestNewDatabaseParallel(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, pgtest.NewDatabase(t))
			if n := queryInt(t, conn, "SELECT 1"); n != 1 {
				t.Fatalf("SELECT 1 = %d", n)
			}
		})
	}
}

func TestDatabaseDroppedOnCleanup(t *testing.T) {
	var name string
	t.Run("create", func(t *testing.T) {
		// Registered before NewDatabase, so this cleanup runs after the
		// drop (cleanups run last-in first-out): the drop must succeed
		// despite the open session.
		var conn *pgx.Conn
		t.Cleanup(func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		})
		var err error
		if conn, err = pgx.Connect(t.Context(), pgtest.NewDatabase(t)); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	admin := connect(t, pgtest.ServerURL(t))
	if n := queryInt(t, admin, fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", name)); n != 0 {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestRestart(t *testing.T) {
	cluster := pgtest.Cluster(t)
	if cluster.External() {
		if err := cluster.Restart(t.Context()); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Fatalf("Restart on an external server: err = %v, want not supported", err)
		}
		t.Skip("external server: cannot restart it")
	}
	url := pgtest.NewDatabase(t)
	conn := connect(t, url)
	if n := queryInt(t, conn, "SELECT 1"); n != 1 {
		t.Fatalf("SELECT 1 = %d", n)
	}

	if err := cluster.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Fatal("session survived a restart")
	}
	if n := queryInt(t, connect(t, url), "SELECT 1"); n != 1 {
		t.Fatalf("after restart: SELECT 1 = %d", n)
	}

	if err := cluster.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, url); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := cluster.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, connect(t, url), "SELECT 1"); n != 1 {
		t.Fatalf("after stop/start: SELECT 1 = %d", n)
	}
}

// TestMissingBinaries runs TestChildNeedsDatabase in a child process that
// cannot find PostgreSQL: it must skip, unless CI=true makes it fail.
func TestMissingBinaries(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildNeedsDatabase$", "-test.v", "-test.count=1")
			cmd.Env = append(withoutEnv("FLOWD_TEST_POSTGRES_URL", "CI"),
				"PGTEST_CHILD=1", "FLOWD_TEST_PG_BINDIR=/nonexistent/pgtest", "CI="+ci)
			out, err := cmd.CombinedOutput()
			output := string(out)
			switch {
			case ci == "" && (err != nil || !strings.Contains(output, "--- SKIP") ||
				!strings.Contains(output, "not found in FLOWD_TEST_PG_BINDIR")):
				t.Fatalf("want a skip; err=%v, output:\n%s", err, output)
			case ci == "true" && (err == nil || !strings.Contains(output, "--- FAIL") ||
				!strings.Contains(output, "not found in FLOWD_TEST_PG_BINDIR")):
				t.Fatalf("want a failure; err=%v, output:\n%s", err, output)
			}
		})
	}
}

func TestChildNeedsDatabase(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "" {
		t.Skip("run by TestMissingBinaries")
	}
	pgtest.NewDatabase(t)
	t.Fatal("NewDatabase returned without PostgreSQL")
}

func withoutEnv(names ...string) []string {
	var env []string
outer:
	for _, kv := range os.Environ() {
		for _, name := range names {
			if strings.HasPrefix(kv, name+"=") {
				continue outer
			}
		}
		env = append(env, kv)
	}
	return env
}
