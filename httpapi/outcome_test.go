package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store/postgres"
)

// pgServer runs the API on a fresh PostgreSQL database reached at url.
func pgServer(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	handler, err := httpapi.NewServer(httpapi.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// call sends a request and decodes an error body into a map, so that an
// absent "outcome" can be told from an empty one.
func callAPI(t *testing.T, method, url, body, ifMatch string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer res.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m
}

// A PATCH whose COMMIT is under way when its backend is terminated may have
// been stored: 503 with "outcome": "unknown". The COMMIT is held open by a
// deferred constraint trigger on the history table that sleeps; the test
// terminates the backend sleeping in it. Both forms of PATCH (If-Match: *
// and a versioned one) are the engine's one guarded write: one pipeline
// (the settings it plans under, its statement, the settings reset) that
// commits on its own, the trigger running at its end.
func TestCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	base := pgServer(t, dbURL)
	if code, _ := callAPI(t, "POST", base+"/v1/workflows", `{"id":"oc"}`, ""); code != 201 {
		t.Fatalf("create: %d", code)
	}
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	for _, stmt := range []string{
		`CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON workflow_history
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit()`,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ ifMatch, query string }{
		// The last statement of the guarded write's pipeline, which the
		// commit follows.
		{"*", "reset plan_cache_mode"},
		{`"0"`, "reset plan_cache_mode"},
	} {
		type answer struct {
			code int
			body map[string]any
		}
		done := make(chan answer, 1)
		go func() {
			code, body := callAPI(t, "PATCH", base+"/v1/workflows/oc", `{"x":1}`, c.ifMatch)
			done <- answer{code, body}
		}()
		var pid int32
		var query string
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := admin.QueryRow(ctx, `SELECT pid, query FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()`).Scan(&pid, &query)
			if err == nil {
				break
			}
			if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
				t.Fatalf("If-Match %s: no backend sleeping in the commit: %v", c.ifMatch, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(strings.ToLower(query), c.query) {
			t.Errorf("If-Match %s: the sleeping backend runs %q, want the write's %s", c.ifMatch, query, c.query)
		}
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.code != 503 || a.body["outcome"] != "unknown" || a.body["error"] != "Service Unavailable" {
			t.Errorf("If-Match %s: PATCH whose commit lost its connection: %d %v, want 503 with outcome unknown", c.ifMatch, a.code, a.body)
		}
	}
}

// A write that cannot reach the database certainly did not happen: 503
// without "outcome". The store reaches PostgreSQL through a proxy that the
// test shuts, so new connections are refused.
func TestUnreachableDatabaseWriteHasNoOutcome(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	p := startProxy(t, dbURL)
	// One connection: once the one the proxy cut is gone, every request
	// has to connect anew.
	base := pgServer(t, p.url+"&pool_max_conns=1")
	if code, _ := callAPI(t, "POST", base+"/v1/workflows", `{"id":"down"}`, ""); code != 201 {
		t.Fatalf("create: %d", code)
	}
	p.shut()
	// The pooled connection is dead: whatever uses it first fails and
	// discards it (a read, whose outcome is not in question).
	if code, _ := callAPI(t, "GET", base+"/v1/workflows/down", "", ""); code != 503 {
		t.Fatalf("GET with the database gone: %d, want 503", code)
	}
	for _, ifMatch := range []string{`"0"`, "*"} {
		code, body := callAPI(t, "PATCH", base+"/v1/workflows/down", `{"x":1}`, ifMatch)
		if _, has := body["outcome"]; code != 503 || has || body["error"] != "Service Unavailable" {
			t.Errorf("If-Match %s: PATCH with the database unreachable: %d %v, want 503 without outcome", ifMatch, code, body)
		}
	}
}

// proxy forwards TCP connections to the database until shut.
type proxy struct {
	url   string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, dbURL string) *proxy {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.Host, fmtPort(cfg.Port))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, url: strings.Replace(dbURL, target, ln.Addr().String(), 1)}
	if !strings.Contains(p.url, "?") {
		p.url += "?"
	}
	t.Cleanup(p.shut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(d, c); d.Close() }()
			go func() { _, _ = io.Copy(c, d); c.Close() }()
		}
	}()
	return p
}

// shut stops accepting and cuts every connection.
func (p *proxy) shut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func fmtPort(p uint16) string { return strconv.Itoa(int(p)) }
