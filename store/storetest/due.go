package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Due: the sweeper's reads. Plain reads that change nothing; the sweeper
// writes each item with Apply, guarded by what it read.

var dueTests = []conformanceTest{
	{"Due_timeouts", testDueTimeouts},
	{"Due_leases", testDueLeases},
	{"Due_invalid", testDueInvalid},
	{"Due_concurrentSweeps", testDueConcurrentSweeps},
}

// due reads items of kind at now through eq and fails t on error.
func (b *bundle) due(t testing.TB, eq store.TaskQuerier, kind store.DueKind, now time.Time, limit int) []store.DueItem {
	t.Helper()
	items, err := eq.Due(b.ctx, store.DueParams{Kind: kind, Now: now, Limit: limit})
	if err != nil {
		t.Fatalf("Due(kind %d, limit %d): %v", kind, limit, err)
	}
	return items
}

// dueTaskIDs returns the task ids of items, checking that each carries its
// task's instance as stored.
func (b *bundle) dueTaskIDs(t testing.TB, items []store.DueItem) []string {
	t.Helper()
	ids := make([]string, len(items))
	for i, it := range items {
		if it.Task == nil || it.Instance == nil || it.Instance.ID != it.Task.InstanceID {
			t.Fatalf("due item %d: task %v with instance %v", i, it.Task, it.Instance)
		}
		assertInstance(t, "instance of due task "+it.Task.ID, b.get(t, it.Instance.ID), it.Instance)
		ids[i] = it.Task.ID
	}
	return ids
}

func testDueTimeouts(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	t0 := clockStart
	withDeadline := func(id string, status workflow.Status, d time.Duration) {
		t.Helper()
		deadline := t0.Add(d)
		b.create(t, store.CreateParams{ID: id, Status: status, State: counterState(0), DefinitionRevision: 1, Deadline: &deadline})
	}
	withDeadline("a", workflow.StatusRunning, -3*time.Minute)
	withDeadline("b", workflow.StatusPaused, -2*time.Minute)
	// A tie on the deadline, created out of id order.
	withDeadline("c2", workflow.StatusRunning, -time.Minute)
	withDeadline("c1", workflow.StatusRunning, -time.Minute)
	// One microsecond before now is due, now itself is not.
	dueAt := store.Timestamp(t0).Add(-time.Microsecond)
	b.create(t, store.CreateParams{ID: "d", Status: workflow.StatusRunning, Deadline: &dueAt})
	wantDue := []string{"a", "b", "c1", "c2", "d"}
	withDeadline("edge", workflow.StatusRunning, 0)
	withDeadline("future", workflow.StatusRunning, time.Minute)
	b.create(t, store.CreateParams{ID: "nodeadline", Status: workflow.StatusRunning})
	withDeadline("pending", workflow.StatusPending, -time.Hour)
	for _, st := range []workflow.Status{workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled, workflow.StatusTimedOut} {
		id := "was-" + string(st)
		withDeadline(id, workflow.StatusRunning, -time.Hour)
		b.transition(t, id, workflow.StatusRunning, st)
	}
	snaps := map[string]snapshot{}
	for _, id := range append(slices.Clone(wantDue), "edge", "future", "nodeadline", "pending") {
		snaps[id] = b.snapshot(t, id)
	}
	// The filter uses the now it is given, never the store's clock.
	b.clock.Set(t0.Add(time.Hour))
	ids := func(items []store.DueItem) []string {
		out := make([]string, len(items))
		for i, it := range items {
			if it.Task != nil {
				t.Errorf("timeout item %s carries a task", it.Instance.ID)
			}
			assertInstance(t, "due instance "+it.Instance.ID, snaps[it.Instance.ID].inst, it.Instance)
			out[i] = it.Instance.ID
		}
		return out
	}
	for _, limit := range []int{100, 2} {
		if diff := cmp.Diff(wantDue[:min(limit, len(wantDue))], ids(b.due(t, eq, store.DueTimeouts, t0, limit))); diff != "" {
			t.Errorf("Due(timeouts, limit %d) (-want +got):\n%s", limit, diff)
		}
	}
	// A later now reaches the edge.
	if got := ids(b.due(t, eq, store.DueTimeouts, store.Timestamp(t0).Add(time.Microsecond), 100)); !slices.Equal(got, append(slices.Clone(wantDue), "edge")) {
		t.Errorf("Due(timeouts) one microsecond later = %v, want the edge too", got)
	}
	for id, s := range snaps {
		b.unchanged(t, "instance "+id+" after Due", s)
	}
}

func testDueLeases(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	t0, sec := clockStart, time.Second
	b.running(t, "run")
	b.create(t, store.CreateParams{ID: "paused", Status: workflow.StatusPaused})
	var tasks []*store.Task
	for _, c := range []struct{ id, inst string }{
		{"e1", "run"}, {"e2", "paused"}, {"e3", "run"}, {"edge", "run"}, {"future", "run"},
		{"queued", "run"}, {"done", "run"},
	} {
		tasks = append(tasks, withID(c.id, newTask(c.inst, "s-"+c.id, "q1", t0.Add(-time.Hour))))
	}
	b.insertTasks(t, tasks...)
	b.lease(t, eq, "e1", t0.Add(-3*sec))
	b.lease(t, eq, "e2", t0.Add(-sec))
	b.lease(t, eq, "e3", t0.Add(-2*sec))
	b.lease(t, eq, "edge", t0) // lease_until == now has not expired
	b.lease(t, eq, "future", t0.Add(sec))
	// lease_until in the past but not LEASED.
	tk := b.lockTask(t, eq, "queued")
	tk.LeaseUntil = t0.Add(-time.Minute)
	b.updateTask(t, tk)
	b.lease(t, eq, "done", t0.Add(-time.Minute))
	b.setTaskStatus(t, eq, "done", store.TaskDone)
	all := b.readTasks(t, eq, "run", "paused")
	snaps := []snapshot{b.snapshot(t, "run"), b.snapshot(t, "paused")}
	b.clock.Set(t0.Add(time.Hour))

	for _, c := range []struct {
		now   time.Time
		limit int
		want  []string
	}{
		{t0, 100, []string{"e1", "e3", "e2"}},
		{t0, 2, []string{"e1", "e3"}},
		{t0, 1, []string{"e1"}},
		{t0.Add(-2500 * time.Millisecond), 100, []string{"e1"}},
		{store.Timestamp(t0).Add(time.Microsecond), 100, []string{"e1", "e3", "e2", "edge"}},
	} {
		items := b.due(t, eq, store.DueLeases, c.now, c.limit)
		if got := b.dueTaskIDs(t, items); !slices.Equal(got, c.want) {
			t.Errorf("Due(leases, %v, %d) = %v, want %v", c.now.Sub(t0), c.limit, got, c.want)
		}
		for _, it := range items {
			assertTask(t, "due task "+it.Task.ID, all[it.Task.ID], it.Task)
		}
	}
	b.tasksUnchanged(t, eq, "after Due", all)
	for _, s := range snaps {
		b.unchanged(t, "instance after Due", s)
	}
}

func testDueInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	for _, kind := range []store.DueKind{store.DueTimeouts, store.DueLeases, store.DueAbandoned,
		store.DueQueued, store.DueHolder, store.DueWaiters, store.DueEventWaiters, store.DueEvent} {
		items, err := eq.Due(b.ctx, store.DueParams{Kind: kind, Now: clockStart, Limit: 10})
		if err != nil || items == nil || len(items) != 0 {
			t.Errorf("Due(kind %d) on an empty database = %#v, %v; want an empty, non-nil slice", kind, items, err)
		}
		for _, limit := range []int{0, -1, store.MaxBatchLimit + 1} {
			_, err := eq.Due(b.ctx, store.DueParams{Kind: kind, Now: clockStart, Limit: limit})
			wantErrorIs(t, fmt.Sprintf("Due(kind %d, limit %d)", kind, limit), err, store.ErrInvalidArgument)
		}
	}
	for _, kind := range []store.DueKind{0, store.DueEvent + 1} {
		_, err := eq.Due(b.ctx, store.DueParams{Kind: kind, Now: clockStart, Limit: 10})
		wantErrorIs(t, fmt.Sprintf("Due(kind %d)", kind), err, store.ErrInvalidArgument)
	}
}

// testDueConcurrentSweeps: sweepers that read the same due instances at
// once and each write every item with Apply, guarded by the version it
// read, time each instance out exactly once: one TIMED_OUT version, the
// losers' writes miss with a conflict and change nothing.
func testDueConcurrentSweeps(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const rows, workers, limit = 60, 4, 7
	all := map[string]bool{}
	for i := range rows {
		deadline := clockStart.Add(time.Duration(i-rows) * time.Second)
		status := workflow.StatusRunning
		if i%3 == 0 {
			status = workflow.StatusPaused
		}
		all[b.create(t, store.CreateParams{ID: fmt.Sprintf("i%02d", i), Status: status, State: stepState(), Deadline: &deadline}).ID] = true
	}
	b.create(t, store.CreateParams{ID: "nodeadline", Status: workflow.StatusRunning})
	var (
		mu        sync.Mutex
		written   = map[string]int{}
		conflicts atomic.Int64
	)
	br := newBarrier(workers)
	runConcurrently(workers, func(int) {
		_ = br.wait()    // a barrier that times out only lets the sweepers go
		for range rows { // bounded: every round writes or finds nothing due
			items, err := eq.Due(b.ctx, store.DueParams{Kind: store.DueTimeouts, Now: clockStart, Limit: limit})
			if err != nil {
				t.Errorf("concurrent Due: %v", err)
				return
			}
			if len(items) == 0 {
				return
			}
			for _, it := range items {
				inst := it.Instance
				_, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
					Status: workflow.StatusTimedOut, State: inst.State.Clone(), Deadline: inst.Deadline, Cause: "workflow timeout"})
				switch {
				case err == nil:
					mu.Lock()
					written[inst.ID]++
					mu.Unlock()
				case errors.Is(err, store.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("Apply of a timeout: %v", err)
					return
				}
			}
		}
	})
	t.Logf("%d writes missed with a conflict", conflicts.Load())
	for id := range all {
		if written[id] != 1 {
			t.Errorf("instance %s was timed out by %d writes, want 1", id, written[id])
		}
		inst := b.get(t, id)
		hist := b.history(t, id)
		if inst.Status != workflow.StatusTimedOut || inst.Version != 1 || len(hist) != 2 || hist[1].Status != workflow.StatusTimedOut {
			t.Errorf("instance %s: status %s, version %d, %d history rows; want TIMED_OUT, 1, 2", id, inst.Status, inst.Version, len(hist))
		}
		if st := inst.State.Steps["a"]; st == nil || st.Status.Active() {
			t.Errorf("instance %s: step a %v after the timeout, want it stopped", id, st)
		}
	}
	if inst := b.get(t, "nodeadline"); inst.Status != workflow.StatusRunning || inst.Version != 0 {
		t.Errorf("instance without deadline: status %s, version %d; want RUNNING, 0", inst.Status, inst.Version)
	}
}
