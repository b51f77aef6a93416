package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
)

var workerTests = []conformanceTest{
	{"Workers_recordAndList", testWorkersRecordAndList},
	{"Workers_replace", testWorkersReplace},
	{"Workers_sinceAndDelete", testWorkersSinceAndDelete},
	{"Workers_invalid", testWorkersInvalid},
	{"Workers_concurrentRecords", testWorkersConcurrentRecords},
	{"Workers_inFlight", testWorkersInFlight},
}

func (b *bundle) recordWorker(t testing.TB, w store.WorkerRecord) {
	t.Helper()
	if err := b.s.RecordWorker(b.ctx, w); err != nil {
		t.Fatalf("RecordWorker(%+v): %v", w, err)
	}
}

func (b *bundle) listWorkers(t testing.TB, since time.Time) []store.WorkerRecord {
	t.Helper()
	ws, err := b.s.ListWorkers(b.ctx, since)
	if err != nil {
		t.Fatalf("ListWorkers(%v): %v", since, err)
	}
	if ws == nil {
		t.Fatalf("ListWorkers(%v) = nil, want a slice", since)
	}
	return ws
}

// testWorkersRecordAndList: what is recorded comes back normalised (handlers
// sorted without duplicates, times in UTC at microseconds), most recent poll
// first, then by worker and node in byte order.
func testWorkersRecordAndList(t *testing.T, h Harness) {
	b := setup(t, h)
	if ws := b.listWorkers(t, clockStart.Add(-time.Hour)); len(ws) != 0 {
		t.Fatalf("ListWorkers on an empty store = %+v, want none", ws)
	}
	t1 := clockStart.Add(time.Second)
	b.recordWorker(t, store.WorkerRecord{Worker: "w1", Handlers: []string{"b", "a", "b"}, Node: "n1", LastPollAt: clockStart})
	b.recordWorker(t, store.WorkerRecord{Worker: "w2", Handlers: []string{"c"}, Node: "n1", LastPollAt: t1})
	b.recordWorker(t, store.WorkerRecord{Worker: "a", Handlers: []string{}, Node: "n2", LastPollAt: t1})
	b.recordWorker(t, store.WorkerRecord{Worker: "B", Handlers: nil, Node: "n2", LastPollAt: t1})
	b.recordWorker(t, store.WorkerRecord{Worker: "w2", Handlers: []string{"c"}, Node: "n0", LastPollAt: t1})
	ts := func(t time.Time) time.Time { return store.Timestamp(t) }
	want := []store.WorkerRecord{
		{Worker: "B", Handlers: []string{}, Node: "n2", LastPollAt: ts(t1)},
		{Worker: "a", Handlers: []string{}, Node: "n2", LastPollAt: ts(t1)},
		{Worker: "w2", Handlers: []string{"c"}, Node: "n0", LastPollAt: ts(t1)},
		{Worker: "w2", Handlers: []string{"c"}, Node: "n1", LastPollAt: ts(t1)},
		{Worker: "w1", Handlers: []string{"a", "b"}, Node: "n1", LastPollAt: ts(clockStart)},
	}
	got := b.listWorkers(t, clockStart)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListWorkers (-want +got):\n%s", diff)
	}
	for _, w := range got {
		if w.LastPollAt.Location() != time.UTC {
			t.Errorf("worker %q: LastPollAt in %v, want UTC", w.Worker, w.LastPollAt.Location())
		}
	}
}

// testWorkersReplace: a (worker, node) has one row, which the latest record
// replaces, handlers included.
func testWorkersReplace(t *testing.T, h Harness) {
	b := setup(t, h)
	b.recordWorker(t, store.WorkerRecord{Worker: "w1", Handlers: []string{"a", "b"}, Node: "n1", LastPollAt: clockStart})
	later := clockStart.Add(3 * time.Second)
	b.recordWorker(t, store.WorkerRecord{Worker: "w1", Handlers: []string{"c"}, Node: "n1", LastPollAt: later})
	want := []store.WorkerRecord{{Worker: "w1", Handlers: []string{"c"}, Node: "n1", LastPollAt: store.Timestamp(later)}}
	if diff := cmp.Diff(want, b.listWorkers(t, clockStart.Add(-time.Hour))); diff != "" {
		t.Errorf("ListWorkers after a second record (-want +got):\n%s", diff)
	}
}

// testWorkersSinceAndDelete: ListWorkers keeps polls at or after since;
// Prune(workers) removes exactly the older ones and counts them.
func testWorkersSinceAndDelete(t *testing.T, h Harness) {
	b := setup(t, h)
	for i := range 5 {
		b.recordWorker(t, store.WorkerRecord{Worker: fmt.Sprintf("w%d", i), Handlers: []string{"h"}, Node: "n",
			LastPollAt: clockStart.Add(time.Duration(i) * time.Minute)})
	}
	names := func(ws []store.WorkerRecord) []string {
		var s []string
		for _, w := range ws {
			s = append(s, w.Worker)
		}
		return s
	}
	cut := store.Timestamp(clockStart.Add(2 * time.Minute))
	if got := names(b.listWorkers(t, cut)); !cmp.Equal(got, []string{"w4", "w3", "w2"}) {
		t.Errorf("ListWorkers(since the third poll) = %v, want [w4 w3 w2]", got)
	}
	if got := b.listWorkers(t, clockStart.Add(time.Hour)); len(got) != 0 {
		t.Errorf("ListWorkers(since after every poll) = %v, want none", names(got))
	}
	n, err := b.prune(store.PruneWorkers, cut, 0)
	if err != nil || n != 2 {
		t.Fatalf("Prune(workers)(the third poll) = %d, %v; want 2, nil", n, err)
	}
	if got := names(b.listWorkers(t, clockStart.Add(-time.Hour))); !cmp.Equal(got, []string{"w4", "w3", "w2"}) {
		t.Errorf("ListWorkers after the delete = %v, want [w4 w3 w2]", got)
	}
	if n, err := b.prune(store.PruneWorkers, cut, 0); err != nil || n != 0 {
		t.Errorf("Prune(workers) again = %d, %v; want 0, nil", n, err)
	}
}

// testWorkersInvalid: a record the contract refuses is ErrInvalidArgument on
// every backend, and nothing is stored.
func testWorkersInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	many := make([]string, store.MaxWorkerHandlers+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d", i)
	}
	long := strings.Repeat("w", store.MaxWorkerNameLength+1)
	for _, w := range []store.WorkerRecord{
		{Worker: "", Handlers: []string{"a"}, Node: "n"},
		{Worker: "w", Handlers: []string{"a"}, Node: ""},
		{Worker: "w\x00", Handlers: []string{"a"}, Node: "n"},
		{Worker: "w\xff", Handlers: []string{"a"}, Node: "n"},
		{Worker: long, Handlers: []string{"a"}, Node: "n"},
		{Worker: "w", Handlers: []string{"a", ""}, Node: "n"},
		{Worker: "w", Handlers: []string{"a\x00"}, Node: "n"},
		{Worker: "w", Handlers: many, Node: "n"},
	} {
		w.LastPollAt = clockStart
		err := b.s.RecordWorker(b.ctx, w)
		wantErrorIs(t, fmt.Sprintf("RecordWorker(worker %.20q, node %q, %d handlers)", w.Worker, w.Node, len(w.Handlers)), err, store.ErrInvalidArgument)
	}
	if ws := b.listWorkers(t, clockStart.Add(-time.Hour)); len(ws) != 0 {
		t.Errorf("ListWorkers after refused records = %+v, want none", ws)
	}
}

// testWorkersConcurrentRecords: nodes record the same worker at once without
// an error, and one row remains.
func testWorkersConcurrentRecords(t *testing.T, h Harness) {
	b := setup(t, h)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			errs <- b.s.RecordWorker(b.ctx, store.WorkerRecord{Worker: "w", Handlers: []string{"h"}, Node: "n",
				LastPollAt: clockStart.Add(time.Duration(i) * time.Millisecond)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent RecordWorker: %v", err)
		}
	}
	if ws := b.listWorkers(t, clockStart.Add(-time.Hour)); len(ws) != 1 {
		t.Errorf("ListWorkers after concurrent records of one worker = %+v, want one row", ws)
	}
}

// testWorkersInFlight: each listed worker counts the tasks LEASED to it now,
// by the worker its lease names, on every node's row of that worker; a
// task done or not leased counts for nobody.
func testWorkersInFlight(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.insertTasks(t,
		withID("t1", newTask("a", "s1", "q1", clockStart.Add(-3*time.Second))),
		withID("t2", newTask("a", "s2", "q1", clockStart.Add(-2*time.Second))),
		withID("t3", newTask("a", "s3", "q2", clockStart.Add(-time.Second))),
		withID("t4", newTask("a", "s4", "q3", clockStart.Add(time.Hour))))
	if got, _, err := eq.ClaimTasks(b.ctx, claimOf("w1", []string{"q1"}, clockStart, 10)); err != nil || len(got) != 2 {
		t.Fatalf("ClaimTasks(w1) = %d tasks, %v; want 2", len(got), err)
	}
	if got, _, err := eq.ClaimTasks(b.ctx, claimOf("w2", []string{"q2"}, clockStart, 10)); err != nil || len(got) != 1 {
		t.Fatalf("ClaimTasks(w2) = %d tasks, %v; want 1", len(got), err)
	}
	for _, w := range []store.WorkerRecord{
		{Worker: "w1", Handlers: []string{"q1"}, Node: "n1", LastPollAt: clockStart},
		{Worker: "w1", Handlers: []string{"q1"}, Node: "n2", LastPollAt: clockStart},
		{Worker: "w2", Handlers: []string{"q2"}, Node: "n1", LastPollAt: clockStart},
		{Worker: "idle", Handlers: []string{"q3"}, Node: "n1", LastPollAt: clockStart},
	} {
		b.recordWorker(t, w)
	}
	inFlight := func() map[string]int {
		m := map[string]int{}
		for _, w := range b.listWorkers(t, clockStart.Add(-time.Hour)) {
			m[w.Worker+"@"+w.Node] = w.InFlight
		}
		return m
	}
	if diff := cmp.Diff(map[string]int{"w1@n1": 2, "w1@n2": 2, "w2@n1": 1, "idle@n1": 0}, inFlight()); diff != "" {
		t.Errorf("in flight (-want +got):\n%s", diff)
	}
	// w2's task ends: w2 holds none.
	before := b.lockTask(t, eq, "t3")
	done := *before
	done.Status, done.Lease, done.LeaseOwner = store.TaskDone, "", ""
	if _, err := b.s.Apply(b.ctx, tasksOnly("a", b.clock.Advance(time.Second), store.TaskWrite{Task: &done, Guard: store.GuardOf(before)})); err != nil {
		t.Fatalf("finishing t3: %v", err)
	}
	if got := inFlight()["w2@n1"]; got != 0 {
		t.Errorf("w2 in flight after its task is done = %d, want 0", got)
	}
}
