package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/pgtest"
)

// withPassword puts a password into a pgtest URL: its server trusts every
// local connection, so the password is never checked, only carried, and
// must never be printed.
func withPassword(t *testing.T, dbURL, password string) string {
	t.Helper()
	if !strings.HasPrefix(dbURL, "postgres://postgres@") {
		t.Skipf("this test needs pgtest's own cluster, not %s", dbURL)
	}
	return strings.Replace(dbURL, "postgres://postgres@", "postgres://postgres:"+password+"@", 1)
}

// A node started while PostgreSQL is down waits for it, logging each try
// with the address redacted, and serves (migrated) once it answers.
func TestServeWaitsForDatabase(t *testing.T) {
	t.Parallel()
	const secret = "pw-wait-s3cret"
	gate, db := pgtest.NewGate(t, pgtest.NewDatabase(t))
	db = withPassword(t, db, secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, out, errOut := testEnv(map[string]string{"FLOWD_DB_WAIT": "30s"})
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, e) }()
	// Down: serve keeps trying instead of exiting.
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(errOut.String(), "database not answering yet") < 2 {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d while the database was down; stderr:\n%s", code, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve logged no two tries within 10s; stderr:\n%s", errOut.String())
		}
	}
	gate.Open()
	deadline = time.Now().Add(20 * time.Second)
	var base string
	for base == "" {
		if m := urlLine.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d after the database came up; stderr:\n%s", code, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start within 20s of the database; stderr:\n%s", errOut.String())
		}
	}
	// Migrated: a workflow can be created.
	res, err := http.Post(base+"/v1/workflows", "application/json", strings.NewReader(`{"id":"after-wait"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Errorf("create after the wait: %d, want 201", res.StatusCode)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d", code)
	}
	logs := errOut.String()
	if strings.Contains(logs+out.String(), secret) {
		t.Errorf("serve printed the database password:\n%s", logs)
	}
	for _, want := range []string{"try=1", "postgres:xxxxx@", "database answered", "applied migration"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
}

// A database that stays down past --db-wait ends serve with an error that
// says how long it waited, without the password.
func TestServeDatabaseWaitTimeout(t *testing.T) {
	t.Parallel()
	const secret = "pw-timeout-s3cret"
	_, db := pgtest.NewGate(t, pgtest.NewDatabase(t))
	db = withPassword(t, db, secret)
	e, out, errOut := testEnv(map[string]string{"FLOWD_DB_WAIT": "1s"})
	start := time.Now()
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, e)
	took := time.Since(start)
	msg := errOut.String()
	if code != exitError || !strings.Contains(msg, "did not answer within 1s (--db-wait)") {
		t.Errorf("serve: exit %d, stderr %q; want exit %d and the wait named", code, msg, exitError)
	}
	if took < time.Second || took > 15*time.Second {
		t.Errorf("serve gave up after %s, want about 1s", took)
	}
	if strings.Contains(msg+out.String(), secret) {
		t.Errorf("serve printed the database password:\n%s", msg)
	}
}

// No form of a database address has its password printed back by serve:
// URL, query parameter, key=value and quoted key=value.
func TestServeNeverPrintsDatabasePassword(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	const secret = "pw-S3cret"
	for _, db := range []string{
		"postgres://u:" + secret + "@" + closed + "/db",
		"postgres://u@" + closed + "/db?password=" + secret,
		"postgresql://u:" + secret + "@" + closed + "/db?sslmode=sometimes",
		"host=127.0.0.1 password=" + secret,
		"host=127.0.0.1 password='" + secret + " with spaces'",
		"postgres://u:" + secret + "@[::1/db",
	} {
		e, out, errOut := testEnv(map[string]string{"FLOWD_DB_WAIT": "0s"})
		code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, e)
		if code == 0 {
			t.Errorf("serve --db %q succeeded", db)
		}
		if all := out.String() + errOut.String(); strings.Contains(all, secret) || errOut.String() == "" {
			t.Errorf("serve --db %q printed %q: want an error without the password", db, all)
		}
	}
}
