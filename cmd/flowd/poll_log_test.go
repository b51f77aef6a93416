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
			// A request logged at info after the polls. A line can be written
			// after its response reached the client, so the lines do not come
			// in the order of the requests: wait for every line that must
			// come, not only the last request's.
			res, err := http.Get(url + "/v1/workflows?limit=1&mark=end")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			wantDebug := 0
			if level == "debug" {
				wantDebug = polls
			}
			var info, debug, refused int
			count := func() {
				info, debug, refused = 0, 0, 0
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
			}
			deadline := time.Now().Add(10 * time.Second)
			for count(); !strings.Contains(logs.String()[before:], "path=/v1/workflows") || refused < 1 || debug < wantDebug; count() {
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if info != 0 || debug != wantDebug || refused != 1 {
				t.Errorf("--log-level %s, %d idle polls and a refused one: %d INFO, %d DEBUG, %d refused lines; want 0, %d, 1:\n%s",
					level, polls, info, debug, refused, wantDebug, logs.String()[before:])
			}
		})
	}
}
