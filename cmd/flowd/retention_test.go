package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/sqlite"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// --retention (here from FLOWD_RETENTION) reaches the sweeper: a workflow
// that finished long ago is deleted by the sweep at start, one that
// finished just now and a live one stay, and /metrics counts the delete.
func TestServeRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	for _, c := range []struct {
		id  string
		at  time.Time
		end workflow.Status
	}{
		{"old", time.Now().Add(-48 * time.Hour), workflow.StatusCompleted},
		{"old-live", time.Now().Add(-48 * time.Hour), workflow.StatusPaused},
		{"new", time.Now(), workflow.StatusFailed},
	} {
		st, err := sqlite.Open(t.Context(), "sqlite:"+path, sqlite.Options{Now: func() time.Time { return c.at }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(t.Context(), store.CreateParams{ID: c.id, Status: workflow.StatusRunning}); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Transition(t.Context(), st, store.TransitionParams{ID: c.id, From: workflow.StatusRunning, To: c.end}); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	url, _ := startServeEnv(t, map[string]string{"FLOWD_RETENTION": "24h"}, "--db", "sqlite:"+path)
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := get("/v1/workflows/old")
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET old: %d 30s after start, want 404 (deleted by the sweep)", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []string{"old-live", "new"} {
		if code, body := get("/v1/workflows/" + id); code != http.StatusOK {
			t.Errorf("GET %s: %d %s, want it kept", id, code, body)
		}
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\nflowd_workflows_deleted_total 1\n") {
		t.Errorf("/metrics does not count one delete:\n%s", grepLines(body, "flowd_workflows_deleted"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
