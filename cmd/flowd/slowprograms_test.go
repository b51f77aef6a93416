package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/pgtest"
)

// hangingSwitch is a Serverless Workflow document whose switch runs a jq
// program that never ends: each evaluation runs until its one-second bound.
const hangingSwitch = `document: {dsl: '1.0.0', namespace: test, name: hang, version: '1.0.0'}
do:
  - choose:
      switch:
        - forever:
            when: 'def f: f; f'
            then: exit
        - otherwise:
            then: exit
`

// While ten workflows each evaluate a program for a second on the node's
// workers, creates of other workflows are answered at their usual pace: no
// evaluation holds the database's write lock (on SQLite, one for every
// write). A create takes a few milliseconds; one that waited for an
// evaluation would take up to a second, one that waited behind several (as
// on SQLite when evaluations ran inside the write transaction: creates took
// up to 8.8 s) seconds. The bounds — their median under one evaluation,
// none as long as three — leave a loaded test machine a wide margin (the
// evaluations keep its cores busy: a median of 0.6 s and a longest of 1.1 s
// were seen beside the rest of the suite), and do not hold when creates
// queue behind evaluations (4 s seen). The engine's TestDecisionsHoldNoWriteLock
// checks the same without timing.
func TestSlowProgramsDoNotStallCreates(t *testing.T) {
	dbs := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, db := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, _ := startServe(t, "--db", db(t))
			send := func(method, path, body, contentType string) (int, []byte) {
				t.Helper()
				req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
				req.Header.Set("Content-Type", contentType)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, b
			}
			if code, body := send("PUT", "/v1/definitions/hang", hangingSwitch, "application/yaml"); code != 201 {
				t.Fatalf("PUT the document: %d %s", code, body)
			}
			// Started at once, as many clients would: their evaluations
			// begin as soon as the workers claim them, and overlap.
			const slow = 10
			var started sync.WaitGroup
			for range slow {
				started.Go(func() {
					if code, body := send("POST", "/v1/workflows", `{"definition":"hang"}`, "application/json"); code != 201 {
						t.Errorf("start: %d %s", code, body)
					}
				})
			}
			started.Wait()
			running := func() int {
				code, body := send("GET", "/v1/workflows?definition=hang&status=RUNNING&limit=100", "", "application/json")
				var page struct{ Workflows []json.RawMessage }
				if code != 200 || json.Unmarshal(body, &page) != nil {
					t.Errorf("list: %d %s", code, body)
					return 0
				}
				return len(page.Workflows)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for deadline := time.Now().Add(60 * time.Second); running() > 0; time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Error("the slow workflows still run after 60s")
						return
					}
				}
			}()
			// Creates, one after the other, for as long as the slow
			// workflows run.
			var took []time.Duration
		creates:
			for {
				select {
				case <-done:
					break creates
				default:
				}
				began := time.Now()
				if code, body := send("POST", "/v1/workflows", `{}`, "application/json"); code != 201 {
					t.Fatalf("create beside the slow workflows: %d %s", code, body)
				}
				took = append(took, time.Since(began))
			}
			slices.Sort(took)
			median, longest := took[len(took)/2], took[len(took)-1]
			t.Logf("%d creates beside %d one-second evaluations: median %s, longest %s", len(took), slow, median, longest)
			if longest >= 3*time.Second || median >= time.Second {
				t.Errorf("creates waited for the evaluations: median %s, longest %s (all: %v)", median, longest, took)
			}
			if len(took) < 5 {
				t.Errorf("only %d creates while the slow workflows ran: the evaluations did not overlap them", len(took))
			}
			// The evaluations ran into their bound: the workflows failed.
			code, body := send("GET", "/v1/workflows?definition=hang&status=FAILED&limit=100", "", "application/json")
			if code != 200 || strings.Count(string(body), "took longer than") < slow {
				t.Errorf("the slow workflows did not all fail for their evaluation's time: %d %.2000s", code, body)
			}
		})
	}
}
