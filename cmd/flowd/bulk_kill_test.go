package main

// The acceptance test of bulk operations across nodes at the process
// boundary: two `flowd serve` processes on one PostgreSQL database, a bulk
// cancel of 20,000 instances, the node working it SIGKILLed midway; the
// other node finishes it, every match cancelled exactly once and nothing
// else touched.
//
// The binary is built without -race whatever the test runs with: the
// race detector slows 20,000 writes past the test's time budget, and the
// engine's bulk code is raced in engine/bulk_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/postgres"
	"github.com/flowd/flowd/workflow"
)

const (
	bulkKillMatches = 20000
	bulkKillOthers  = 200
	bulkKillLease   = 2 * time.Second
)

var engineNodeLine = regexp.MustCompile(`engine started.*?node=(\S+)`)

// bulkNode is one `flowd serve` process.
type bulkNode struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	url    string
	node   string
	exited chan struct{}
}

func startBulkNode(t *testing.T, bin, db string) *bulkNode {
	t.Helper()
	n := &bulkNode{out: &syncBuffer{}, exited: make(chan struct{})}
	n.cmd = exec.Command(bin, "serve", "--db", db, "--addr", "127.0.0.1:0", "--lease", bulkKillLease.String(),
		"--sweep-interval", "100ms", "--log-level", "info", "--db-wait", "20s")
	n.cmd.Env = slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "FLOWD_") })
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for n.url == "" || n.node == "" {
		out := n.out.String()
		if m := urlLine.FindStringSubmatch(out); m != nil {
			n.url = m[1]
		}
		if m := engineNodeLine.FindStringSubmatch(out); m != nil {
			n.node = strings.Trim(m[1], `"`)
		}
		select {
		case <-n.exited:
			t.Fatalf("flowd serve exited: %s\n%s", n.cmd.ProcessState, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("flowd serve did not start within 30s:\n%s", out)
		}
	}
	return n
}

func TestBulkCancelSurvivesANodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 instances on two processes")
	}
	t.Parallel()
	bin := buildFlowd(t)
	db := pgtest.NewDatabase(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, db, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The instances: free-form, PENDING, created by the test (not timed).
	ids := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range ids {
				if _, err := st.Create(ctx, store.CreateParams{ID: id}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range bulkKillMatches {
		ids <- fmt.Sprintf("m-%05d", i)
		if i%(bulkKillMatches/bulkKillOthers) == 0 {
			ids <- fmt.Sprintf("n-%05d", i) // the same age, another prefix
		}
	}
	close(ids)
	wg.Wait()
	if t.Failed() {
		return
	}

	a := startBulkNode(t, bin, db)
	b := startBulkNode(t, bin, db)
	nodes := map[string]*bulkNode{a.node: a, b.node: b}
	start := time.Now()
	res, err := http.Post(a.url+"/v1/bulk", "application/json", strings.NewReader(`{"action": "cancel", "filter": {"id_prefix": "m-"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var op api.BulkOperation
	_ = json.NewDecoder(res.Body).Decode(&op)
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Fatalf("POST /v1/bulk: %d %+v", res.StatusCode, op)
	}

	// Midway: after some progress, before the end, the node working it is
	// SIGKILLed.
	var killed, survivor *bulkNode
	deadline := time.Now().Add(60 * time.Second)
	for killed == nil {
		rec, err := store.GetBulk(ctx, st, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != store.BulkRunning {
			t.Fatalf("the bulk ended before a node could be killed: %+v", rec)
		}
		if rec.Done >= bulkKillMatches/4 && len(rec.Pending) > 0 {
			killed = nodes[rec.LeaseOwner]
			if killed == nil {
				t.Fatalf("lease owner %q is neither node (%s, %s)", rec.LeaseOwner, a.node, b.node)
			}
			_ = killed.cmd.Process.Kill()
			<-killed.exited
			t.Logf("killed %s after %d done, %d in flight, %s in", killed.node, rec.Done, len(rec.Pending), time.Since(start).Round(time.Millisecond))
			survivor = map[bool]*bulkNode{true: b, false: a}[killed == a]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress to kill in: %+v", rec)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The other node finishes it.
	for op.Status == "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("the bulk is still RUNNING after 60s: %+v\nsurvivor's log:\n%s", op, survivor.out.String())
		}
		time.Sleep(100 * time.Millisecond)
		res, err := http.Get(survivor.url + "/v1/bulk/" + op.ID)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(res.Body).Decode(&op)
		res.Body.Close()
	}
	elapsed := time.Since(start)
	t.Logf("DONE in %s: %+v", elapsed.Round(time.Millisecond), op)
	if op.Status != "DONE" || op.Done != bulkKillMatches || op.Matched != op.Done+op.Skipped+op.Failed || op.Skipped != 0 || op.Failed != 0 {
		t.Errorf("the bulk: %s matched %d done %d skipped %d failed %d (errors %v); want DONE with %d done",
			op.Status, op.Matched, op.Done, op.Skipped, op.Failed, op.Errors, bulkKillMatches)
	}
	if rec, _ := store.GetBulk(ctx, st, op.ID); rec.LeaseOwner != survivor.node {
		t.Errorf("finished by %q, not the node left (%s)", rec.LeaseOwner, survivor.node)
	}

	// Every match cancelled exactly once; nothing else touched.
	check := make(chan string)
	var mu sync.Mutex
	bad := 0
	for range 8 {
		wg.Go(func() {
			for id := range check {
				inst, err := st.Get(ctx, id)
				if err != nil {
					t.Error(err)
					continue
				}
				problem := ""
				if strings.HasPrefix(id, "n-") {
					if inst.Version != 0 || inst.Status != workflow.StatusPending {
						problem = fmt.Sprintf("%s, not matched, is %s at version %d", id, inst.Status, inst.Version)
					}
				} else {
					h, err := st.History(ctx, id, 0, 0)
					if err != nil {
						t.Error(err)
						continue
					}
					cancels := 0
					for _, e := range h {
						if e.Status == workflow.StatusCancelled && (e.Version == 0 || h[e.Version-1].Status != workflow.StatusCancelled) {
							cancels++
						}
					}
					if inst.Status != workflow.StatusCancelled || cancels != 1 || len(h) != 2 || h[1].Cause != "bulk cancel "+op.ID {
						var b bytes.Buffer
						for _, e := range h {
							fmt.Fprintf(&b, " v%d %s %q;", e.Version, e.Status, e.Cause)
						}
						problem = fmt.Sprintf("%s is %s, history:%s", id, inst.Status, b.String())
					}
				}
				if problem != "" {
					mu.Lock()
					if bad++; bad <= 10 {
						t.Error(problem)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range bulkKillMatches {
		check <- fmt.Sprintf("m-%05d", i)
		if i%(bulkKillMatches/bulkKillOthers) == 0 {
			check <- fmt.Sprintf("n-%05d", i)
		}
	}
	close(check)
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d instances wrong", bad)
	}
	if elapsed > 60*time.Second {
		t.Errorf("the bulk took %s", elapsed)
	}
}
