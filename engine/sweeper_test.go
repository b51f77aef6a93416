package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Two nodes that sweep the same due work at once write each item exactly
// once: the guards of their writes make the loser miss, and it skips the
// item. A workflow past its deadline gets one TIMED_OUT version, an expired
// lease uses up one attempt, an orphan task is cancelled; every history
// stays contiguous.
func TestConcurrentSweepsWriteEachItemOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addr := b.newDB(t)
		n := newNode(t, b, addr, nodeOpts{workers: -1, noStart: true})
		n.define(`{"name": "to", "timeout": "1h", "steps": [{"id": "a", "type": "task", "handler": "h"}]}`)
		n.define(`{"name": "le", "steps": [{"id": "a", "type": "task", "handler": "g", "retry": {"max_attempts": 3}}]}`)
		ctx := context.Background()
		const each = 8
		var timeouts, leases []string
		for i := range each {
			timeouts = append(timeouts, n.start("to", fmt.Sprintf("to-%d", i), "").ID)
			leases = append(leases, n.start("le", fmt.Sprintf("le-%d", i), "").ID)
		}
		// A remote worker takes every task and never answers: the leases of
		// "le" end after a second, those of "to" outlive the workflow
		// timeout (their tasks become orphans).
		for _, c := range []struct {
			handler string
			lease   time.Duration
		}{{"h", 3 * time.Hour}, {"g", time.Second}} {
			for range each {
				task, err := n.eng.Poll(ctx, engine.PollParams{Worker: "gone", Handlers: []string{c.handler}, Lease: c.lease})
				if err != nil || task == nil {
					t.Fatalf("poll of %s: %v, %v", c.handler, task, err)
				}
			}
		}

		// Two nodes whose clock is two hours on.
		later := time.Now().Add(2 * time.Hour)
		var sweepers [2]*engine.Engine
		for i := range sweepers {
			st := b.open(t, addr)
			t.Cleanup(func() { st.Close() })
			none := 0
			eng, err := engine.New(engine.Config{Store: st, Workers: &none, Now: func() time.Time { return later }})
			if err != nil {
				t.Fatal(err)
			}
			sweepers[i] = eng
		}
		for range 3 {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, eng := range sweepers {
				wg.Go(func() {
					<-start
					if err := eng.Sweep(ctx); err != nil {
						t.Errorf("a sweep failed: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
		}

		for _, id := range timeouts {
			inst := n.waitStatus(id, workflow.StatusTimedOut, time.Second)
			h := n.checkHistory(inst)
			if got := countHistory(h, func(e store.HistoryEntry) bool { return e.Status == workflow.StatusTimedOut }); got != 1 {
				t.Errorf("%s: %d TIMED_OUT versions, want 1", id, got)
			}
			if tasks := tasksOf(t, n.st, id); len(tasks) != 1 || tasks[0].Status != store.TaskCancelled || tasks[0].Lease != "" {
				t.Errorf("%s: task %+v after the sweeps, want it CANCELLED, its lease revoked", id, tasks[0])
			}
		}
		for _, id := range leases {
			inst := n.waitStatus(id, workflow.StatusRunning, time.Second)
			h := n.checkHistory(inst)
			if got := countHistory(h, func(e store.HistoryEntry) bool { return strings.Contains(e.Cause, "lease expired") }); got != 1 {
				t.Errorf("%s: %d lease expiry versions, want 1", id, got)
			}
			if a := inst.State.Steps["a"]; a.Status != workflow.StepRunning || a.Attempts != 1 {
				t.Errorf("%s: step a %+v after the expiry, want RUNNING after 1 attempt", id, a)
			}
			if tasks := tasksOf(t, n.st, id); len(tasks) != 1 || tasks[0].Status != store.TaskQueued || tasks[0].Attempt != 1 || tasks[0].Lease != "" {
				t.Errorf("%s: task %+v after the expiry, want QUEUED after attempt 1, no lease", id, tasks[0])
			}
		}
	})
}

func countHistory(h []store.HistoryEntry, match func(store.HistoryEntry) bool) int {
	n := 0
	for _, e := range h {
		if match(e) {
			n++
		}
	}
	return n
}

func tasksOf(t *testing.T, st store.Backend, id string) []*store.Task {
	t.Helper()
	tasks, err := st.TasksOfInstance(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}
