package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ReadLeasedCounts reads rows of (key, leased), a store's rows of LEASED
// counts, into a map, for Harness.LeasedCounts.
func ReadLeasedCounts(tb testing.TB, rows SlotRows) map[string]int {
	tb.Helper()
	out := map[string]int{}
	for rows.Next() {
		var (
			key string
			n   int
		)
		if err := rows.Scan(&key, &n); err != nil {
			tb.Fatal(err)
		}
		out[key] = n
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// checkLeased checks the store's rows of LEASED counts against want and
// against the tasks: the count of each key is its LEASED tasks.
func (b *bundle) checkLeased(t *testing.T, h Harness, what string, want map[string]int, instances ...string) {
	t.Helper()
	got := h.LeasedCounts(t, b.s)
	if !maps.Equal(got, want) {
		t.Errorf("%s: leased counts %v, want %v", what, got, want)
	}
	for key, n := range want {
		if tasks := b.leasedOf(t, key, instances...); tasks != n {
			t.Errorf("%s: %d LEASED tasks of %q, want %d", what, tasks, key, n)
		}
	}
}

// ended is tk as a write that ends its lease with status leaves it,
// guarded by tk as read.
func ended(tk *store.Task, status store.TaskStatus) store.TaskWrite {
	done := *tk
	done.Status, done.Lease, done.LeaseOwner, done.LeaseUntil = status, "", "", time.Time{}
	return store.TaskWrite{Task: &done, Guard: store.GuardOf(tk)}
}

// The row of LEASED counts of a key stays equal to the key's LEASED tasks
// through every write that leases a task or ends a lease: a claim, a
// completion and a failure (tasks-only), a retry and a lease expiry
// re-queue (with the instance's version), a release, a stop that cancels
// the instance's tasks; tasks of another key and without a key change
// only their own.
func testFlowControlLeasedCounts(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.running(t, "b")
	tasks := append(keyedTasks("a", 5, "k", 4), underKey(withID("j0", newTask("b", "j0", "q", clockStart.Add(-time.Minute))), "j", 1),
		withID("free", newTask("b", "free", "q", clockStart.Add(-time.Minute))))
	b.insertTasks(t, tasks...)
	b.checkLeased(t, h, "before any claim", map[string]int{}, "a", "b")

	got := claimAll(t, eq, []string{"q"}, clockStart, 100, nil)
	if len(got) != 6 {
		t.Fatalf("claimed %v, want four of k, j0 and free", ids(got))
	}
	byID := map[string]*store.Task{}
	for _, tk := range got {
		byID[tk.ID] = tk
	}
	b.checkLeased(t, h, "claimed", map[string]int{"k": 4, "j": 1}, "a", "b")

	b.finishTask(t, byID["k0"], store.TaskDone, clockStart)
	b.finishTask(t, byID["free"], store.TaskDone, clockStart)
	b.checkLeased(t, h, "a completion", map[string]int{"k": 3, "j": 1}, "a", "b")
	b.finishTask(t, byID["j0"], store.TaskFailed, clockStart)
	b.checkLeased(t, h, "a failure", map[string]int{"k": 3, "j": 0}, "a", "b")

	// A failed attempt retried and an expired lease re-queued, in one
	// write with the instance's version.
	inst, err := b.s.Get(b.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	retry := ended(byID["k1"], store.TaskQueued)
	retry.Task.LastError = "boom"
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: "a", ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
		State: inst.State, Cause: "retry and expiry", Now: clockStart,
		Update: []store.TaskWrite{retry, ended(byID["k2"], store.TaskQueued)}}); err != nil {
		t.Fatalf("Apply of a retry and an expiry: %v", err)
	}
	b.checkLeased(t, h, "a retry and an expiry", map[string]int{"k": 1, "j": 0}, "a", "b")

	// The re-queued tasks are claimed again, up to the limit.
	again := claimAll(t, eq, []string{"q"}, clockStart, 100, nil)
	if len(again) != 3 {
		t.Fatalf("claimed %v again, want k1, k2 and k4", ids(again))
	}
	for _, tk := range again {
		byID[tk.ID] = tk
	}
	b.checkLeased(t, h, "claimed again", map[string]int{"k": 4, "j": 0}, "a", "b")

	// A release (tasks-only, with the instance's status as its guard).
	released := ended(byID["k1"], store.TaskQueued)
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: "a", TasksOnly: true, From: workflow.StatusRunning, Now: clockStart,
		Update: []store.TaskWrite{released}}); err != nil {
		t.Fatalf("a release: %v", err)
	}
	b.checkLeased(t, h, "a release", map[string]int{"k": 3, "j": 0}, "a", "b")

	// A stop cancels the instance's tasks, leased and queued.
	inst, err = b.s.Get(b.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	aTasks, err := eq.TasksOfInstance(b.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var cancels []store.TaskWrite
	for _, tk := range aTasks {
		if tk.Status.Active() {
			cancels = append(cancels, ended(tk, store.TaskCancelled))
		}
	}
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: "a", ExpectedVersion: inst.Version, From: inst.Status, Status: workflow.StatusCancelled,
		State: inst.State, Cause: "stop", Now: clockStart, Update: cancels}); err != nil {
		t.Fatalf("Apply of a stop: %v", err)
	}
	b.checkLeased(t, h, "a stop", map[string]int{"k": 0, "j": 0}, "a", "b")
}

// A write whose change to a key's LEASED count would take it below zero
// (the row was not kept) writes nothing and returns ErrLeasedCount; a
// claim that finds a key's row at its limit leases nothing of the key.
func testFlowControlLeasedCountGuard(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.insertTasks(t,
		underKey(withID("k0", newTask("a", "s0", "q", clockStart.Add(-time.Minute))), "k", 2),
		underKey(withID("k1", newTask("a", "s1", "q", clockStart.Add(-time.Minute+time.Millisecond))), "k", 2))
	got := claimAll(t, eq, []string{"q"}, clockStart, 1, nil)
	if len(got) != 1 {
		t.Fatalf("claimed %v, want one task", ids(got))
	}
	h.SetLeased(t, b.s, "k", 0)
	done := ended(got[0], store.TaskDone)
	_, err := b.s.Apply(b.ctx, &store.Write{ID: "a", TasksOnly: true, Now: clockStart, Update: []store.TaskWrite{done}})
	wantErrorIs(t, "a completion below a count of zero", err, store.ErrLeasedCount)
	inst, err := b.s.Get(b.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.s.Apply(b.ctx, &store.Write{ID: "a", ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
		State: inst.State, Cause: "complete", Now: clockStart, Update: []store.TaskWrite{ended(got[0], store.TaskDone)}})
	wantErrorIs(t, "a versioned completion below a count of zero", err, store.ErrLeasedCount)
	if after, err := b.s.Get(b.ctx, "a"); err != nil || after.Version != inst.Version {
		t.Errorf("the refused write moved the instance: %v, %v", after, err)
	}
	if n := b.leasedOf(t, "k", "a"); n != 1 {
		t.Errorf("%d LEASED tasks of k after the refused writes, want 1", n)
	}
	// The row at the limit: the claim query and the claim's guard both
	// keep k1 queued.
	h.SetLeased(t, b.s, "k", 2)
	if more := claimAll(t, eq, []string{"q"}, clockStart, 10, nil); len(more) != 0 {
		t.Errorf("a claim with the key's row at its limit leased %v", ids(more))
	}
}
