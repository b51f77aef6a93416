package storetest

import (
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

// timeoutCause is the history cause of TimeOutInstances.
const timeoutCause = "workflow timeout"

func testTimeOutInstancesOK(t *testing.T, h Harness) {
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
	due := store.Timestamp(t0).Add(-time.Microsecond)
	b.create(t, store.CreateParams{ID: "d", Status: workflow.StatusRunning, Deadline: &due})
	movable := []string{"a", "b", "c1", "c2", "d"}

	withDeadline("edge", workflow.StatusRunning, 0)
	withDeadline("future", workflow.StatusRunning, time.Minute)
	b.create(t, store.CreateParams{ID: "nodeadline", Status: workflow.StatusRunning})
	withDeadline("pending", workflow.StatusPending, -time.Hour)
	for _, st := range []workflow.Status{workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled, workflow.StatusTimedOut} {
		id := "was-" + string(st)
		withDeadline(id, workflow.StatusRunning, -time.Hour)
		b.transition(t, id, workflow.StatusRunning, st)
	}
	others := []string{"edge", "future", "nodeadline", "pending", "was-COMPLETED", "was-FAILED", "was-CANCELLED", "was-TIMED_OUT"}
	before := map[string]snapshot{}
	for _, id := range append(slices.Clone(movable), others...) {
		before[id] = b.snapshot(t, id)
	}

	check := func(call string, got, want []string, now time.Time) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: ids (-want +got):\n%s", call, diff)
		}
		for _, id := range want {
			old := before[id].inst
			timedOut := stoppedAs(old.State, workflow.StatusTimedOut)
			assertInstance(t, call+": "+id, withVersion(old, now, workflow.StatusTimedOut, timedOut), b.get(t, id))
			wantHist := append(slices.Clone(before[id].history), store.HistoryEntry{
				Version: old.Version + 1, Status: workflow.StatusTimedOut, State: timedOut, At: store.Timestamp(now), Cause: timeoutCause,
			})
			assertHistory(t, call+": history of "+id, wantHist, b.history(t, id))
		}
	}
	// The filter uses the now it is given; updated_at and history use the
	// store's clock, which is later here.
	clock1 := b.clock.Set(t0.Add(time.Hour + 1))
	got, err := eq.TimeOutInstances(b.ctx, t0, 2)
	if err != nil {
		t.Fatalf("TimeOutInstances(now, 2): %v", err)
	}
	check("TimeOutInstances(now, 2)", got, movable[:2], clock1)

	clock2 := b.clock.Advance(time.Minute)
	err = b.inEngineTx(func(_ store.Querier, teq store.EngineQuerier) error {
		got, err = teq.TimeOutInstances(b.ctx, t0, 100)
		return err
	})
	if err != nil {
		t.Fatalf("tx.TimeOutInstances(now, 100): %v", err)
	}
	check("tx.TimeOutInstances(now, 100)", got, movable[2:], clock2)

	got, err = eq.TimeOutInstances(b.ctx, t0, 100)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("TimeOutInstances with nothing due = %#v, %v; want []string{}, nil", got, err)
	}
	for _, id := range others {
		b.unchanged(t, "instance "+id+" not due", before[id])
	}
	// A later now reaches the edge.
	got, err = eq.TimeOutInstances(b.ctx, store.Timestamp(t0).Add(time.Microsecond), 100)
	if err != nil || !slices.Equal(got, []string{"edge"}) {
		t.Errorf("TimeOutInstances one microsecond later = %v, %v; want [edge]", got, err)
	}
}

func testTimeOutInstancesEmpty(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	got, err := eq.TimeOutInstances(b.ctx, clockStart, 10)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("TimeOutInstances on an empty database = %#v, %v; want []string{}, nil", got, err)
	}
	b.create(t, store.CreateParams{ID: "nodeadline", Status: workflow.StatusRunning})
	later := clockStart.Add(time.Hour)
	b.create(t, store.CreateParams{ID: "later", Status: workflow.StatusRunning, Deadline: &later})
	snaps := []snapshot{b.snapshot(t, "nodeadline"), b.snapshot(t, "later")}
	err = b.inEngineTx(func(_ store.Querier, teq store.EngineQuerier) error {
		got, err = teq.TimeOutInstances(b.ctx, clockStart, 10)
		return err
	})
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("tx.TimeOutInstances with nothing due = %#v, %v; want []string{}, nil", got, err)
	}
	for _, s := range snaps {
		b.unchanged(t, "TimeOutInstances with nothing due", s)
	}
}

func testTimeOutInstancesConcurrent(t *testing.T, h Harness) {
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
		all[b.create(t, store.CreateParams{ID: fmt.Sprintf("i%02d", i), Status: status, Deadline: &deadline}).ID] = true
	}
	b.create(t, store.CreateParams{ID: "nodeadline", Status: workflow.StatusRunning})
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		calls atomic.Int64
	)
	runConcurrently(workers, func(int) {
		for range rows { // bounded: every non-empty call moves at least one row
			ids, err := eq.TimeOutInstances(b.ctx, clockStart, limit)
			calls.Add(1)
			if err != nil {
				t.Errorf("concurrent TimeOutInstances: %v", err)
				return
			}
			if len(ids) > limit {
				t.Errorf("a call returned %d ids, limit is %d", len(ids), limit)
			}
			if len(ids) == 0 {
				return
			}
			mu.Lock()
			for _, id := range ids {
				seen[id]++
			}
			mu.Unlock()
		}
	})
	t.Logf("%d TimeOutInstances calls by %d goroutines", calls.Load(), workers)
	for id, n := range seen {
		if n != 1 {
			t.Errorf("id %s was returned by %d calls, want 1", id, n)
		}
		if !all[id] {
			t.Errorf("id %s was returned but is not due", id)
		}
	}
	if len(seen) != rows {
		t.Errorf("the calls returned %d distinct ids, want all %d", len(seen), rows)
	}
	for id := range all {
		inst := b.get(t, id)
		if inst.Status != workflow.StatusTimedOut || inst.Version != 1 {
			t.Errorf("instance %s: status %s, version %d; want TIMED_OUT, 1", id, inst.Status, inst.Version)
		}
		if hist := b.history(t, id); len(hist) != 2 || hist[1].Cause != timeoutCause {
			t.Errorf("instance %s has %d history rows, want 2 ending with %q", id, len(hist), timeoutCause)
		}
	}
	if inst := b.get(t, "nodeadline"); inst.Status != workflow.StatusRunning || inst.Version != 0 {
		t.Errorf("instance without deadline: status %s, version %d; want RUNNING, 0", inst.Status, inst.Version)
	}
}
