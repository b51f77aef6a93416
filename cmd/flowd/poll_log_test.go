package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An idle node with a polling worker writes no INFO line per poll: long
// polls are logged at debug (--log-level debug shows them), and a poll
// the server refuses is still logged at info.
func TestIdlePollsLoggedAtDebug(t *testing.T) {
	const polls = 10
	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			url, logs, _ := startServeLogs(t, nil, "--db", "sqlite:"+filepath.Join(t.TempDir(), "f.db"), "--log-level", level)
			post := func(body string) int {
				t.Helper()
				res, err := http.Post(url+"/v1/tasks/poll", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			before := len(logs.String())
			for range polls {
				if code := post(`{"worker": "w1", "handlers": ["idle"], "wait_seconds": 0.05}`); code != http.StatusNoContent {
					t.Fatalf("poll: %d, want 204", code)
				}
			}
			if code := post(`{"worker": "w1", "handlers": ["idle"], "wait_seconds": -1}`); code != http.StatusBadRequest {
				t.Fatalf("poll with a negative wait: %d, want 400", code)
			}
			// A request logged at info after the polls: once its line is
			// there, so are theirs.
			res, err := http.Get(url + "/v1/workflows?limit=1&mark=end")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String()[before:], "path=/v1/workflows") {
				if time.Now().After(deadline) {
					t.Fatalf("no log line of the last request:\n%s", logs.String()[before:])
				}
				time.Sleep(10 * time.Millisecond)
			}
			var info, debug, refused int
			for _, line := range strings.Split(logs.String()[before:], "\n") {
				if !strings.Contains(line, "path=/v1/tasks/poll") {
					continue
				}
				switch {
				case strings.Contains(line, "level=INFO") && strings.Contains(line, "status=400"):
					refused++
				case strings.Contains(line, "level=INFO"):
					info++
				case strings.Contains(line, "level=DEBUG"):
					debug++
				}
			}
			wantDebug := 0
			if level == "debug" {
				wantDebug = polls
			}
			if info != 0 || debug != wantDebug || refused != 1 {
				t.Errorf("--log-level %s, %d idle polls and a refused one: %d INFO, %d DEBUG, %d refused lines; want 0, %d, 1:\n%s",
					level, polls, info, debug, refused, wantDebug, logs.String()[before:])
			}
		})
	}
}
