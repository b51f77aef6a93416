package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Conformance of the flow control of tasks: an instance's priority, the
// order it gives claims, concurrency keys (never more leased tasks of a key
// than its limit, whoever claims) and rate-limit buckets refilled with the
// claim's clock.

var flowControlTests = []conformanceTest{
	{"FlowControl_roundTrip", testFlowControlRoundTrip},
	{"FlowControl_invalid", testFlowControlInvalid},
	{"FlowControl_priorityOrder", testFlowControlPriorityOrder},
	{"FlowControl_concurrencyLimit", testFlowControlConcurrencyLimit},
	{"FlowControl_concurrencySlotsFreed", testFlowControlSlotsFreed},
	{"FlowControl_concurrentClaimers", testFlowControlConcurrentClaimers},
	{"FlowControl_rateBucket", testFlowControlRateBucket},
	{"FlowControl_groupClaim", testFlowControlGroupClaim},
	{"FlowControl_leasedCounts", testFlowControlLeasedCounts},
	{"FlowControl_leasedCountGuard", testFlowControlLeasedCountGuard},
}

// underKey returns a task under concurrency key key with limit.
func underKey(tk *store.Task, key string, limit int) *store.Task {
	tk.Flow.ConcurrencyKey, tk.Flow.ConcurrencyLimit = key, limit
	return tk
}

// keyedTasks are n tasks of instance inst under key with limit, with ids
// key0, key1, … and run_at a millisecond apart from a minute before the
// clock's start, in that order.
func keyedTasks(inst string, n int, key string, limit int) []*store.Task {
	tasks := make([]*store.Task, n)
	for i := range n {
		tasks[i] = underKey(withID(fmt.Sprintf("%s%d", key, i), newTask(inst, fmt.Sprintf("s%d", i), "q", clockStart.Add(time.Duration(i)*time.Millisecond-time.Minute))), key, limit)
	}
	return tasks
}

// TasksUnderKey are tasks of instance inst on queue "q", one for each id
// (its step too), under concurrency key with limit, due a minute before
// now a millisecond apart in the order given: a store's own tests of what
// a claim holds back.
func TasksUnderKey(inst, key string, limit int, now time.Time, ids ...string) []*store.Task {
	tasks := make([]*store.Task, len(ids))
	for i, id := range ids {
		tasks[i] = &store.Task{ID: id, InstanceID: inst, StepID: id, Queue: "q", MaxAttempts: 1,
			RunAt: now.Add(time.Duration(i)*time.Millisecond - time.Minute), Flow: workflow.TaskFlow{ConcurrencyKey: key, ConcurrencyLimit: limit}}
	}
	return tasks
}

// claimAll claims up to limit tasks of queues at now for "w", and returns
// the tasks leased; held receives what the keys held back (nil: not
// asked).
func claimAll(t testing.TB, eq store.TaskQuerier, queues []string, now time.Time, limit int, held *store.HeldBack) []*store.Task {
	t.Helper()
	p := claimOf("w", queues, now, limit)
	p.Lease = time.Hour
	claimed, h, err := eq.ClaimTasks(t.Context(), p)
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	if held != nil {
		*held = h
	}
	return claimedTasks(claimed)
}

// finishTask ends a leased task's lease with status (DONE, FAILED, or
// QUEUED as a lease expiry re-queues it), guarded by the row as claimed.
func (b *bundle) finishTask(t testing.TB, tk *store.Task, status store.TaskStatus, now time.Time) {
	t.Helper()
	done := *tk
	done.Status = status
	guard := store.GuardOf(tk)
	done.Lease, done.LeaseOwner, done.LeaseUntil = "", "", time.Time{}
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: tk.InstanceID, TasksOnly: true, Now: now,
		Update: []store.TaskWrite{{Task: &done, Guard: guard}}}); err != nil {
		t.Fatalf("finishing task %s as %s: %v", tk.ID, status, err)
	}
}

// leasedOf counts the LEASED tasks of key among the instances' tasks.
func (b *bundle) leasedOf(t testing.TB, key string, instances ...string) int {
	t.Helper()
	n := 0
	for _, id := range instances {
		tasks, err := b.engine(t).TasksOfInstance(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if tk.Status == store.TaskLeased && tk.Flow.ConcurrencyLimit > 0 && tk.Flow.ConcurrencyKey == key {
				n++
			}
		}
	}
	return n
}

func ids(tasks []*store.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.ID
	}
	return out
}

func testFlowControlRoundTrip(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := NewInstance(t, b.s, store.CreateParams{ID: "p", Status: workflow.StatusRunning, Priority: 4})
	if inst.Priority != 4 || b.get(t, "p").Priority != 4 {
		t.Errorf("priority: created %d, read %d; want 4", inst.Priority, b.get(t, "p").Priority)
	}
	if got := NewInstance(t, b.s, store.CreateParams{ID: "free"}).Priority; got != 0 {
		t.Errorf("an instance created without a priority has %d, want 0", got)
	}
	flow := workflow.TaskFlow{Priority: 5, ConcurrencyKey: "tenant-é", ConcurrencyLimit: 7, RateKey: "", RatePerSecond: 0.25, RateBurst: 2}
	tk := withID("f", newTask("p", "s", "q", clockStart))
	tk.Flow, tk.AttemptTimeout = flow, 90*time.Second+250*time.Microsecond
	plain := withID("g", newTask("p", "t", "q", clockStart))
	b.insertTasks(t, tk, plain)
	got := b.lockTask(t, b.engine(t), "f")
	if got.Flow != flow {
		t.Errorf("flow read back %+v, want %+v", got.Flow, flow)
	}
	if got.AttemptTimeout != tk.AttemptTimeout {
		t.Errorf("attempt timeout read back %v, want %v", got.AttemptTimeout, tk.AttemptTimeout)
	}
	if got := b.lockTask(t, b.engine(t), "g").Flow; got != (workflow.TaskFlow{Priority: workflow.DefaultPriority}) {
		t.Errorf("a task without flow control reads back %+v, want priority 3 alone", got)
	}
	if plain.Flow.Priority != workflow.DefaultPriority {
		t.Errorf("the inserted task was given priority %d, want it completed as stored (3)", plain.Flow.Priority)
	}
}

func testFlowControlInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	b.running(t, "p")
	for _, f := range []workflow.TaskFlow{
		{Priority: 6},
		{Priority: -1},
		{ConcurrencyKey: "k"},
		{ConcurrencyKey: "k", ConcurrencyLimit: -1},
		{RatePerSecond: -1, RateBurst: 1},
		{RatePerSecond: 1},
		{RateKey: "k"},
	} {
		tk := newTask("p", "s", "q", clockStart)
		tk.Flow = f
		err := InsertTasks(b.ctx, b.s, []*store.Task{tk})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("inserting a task with flow %+v: %v, want ErrInvalidArgument", f, err)
		}
	}
	tk := newTask("p", "s", "q", clockStart)
	tk.AttemptTimeout = -time.Second
	err := InsertTasks(b.ctx, b.s, []*store.Task{tk})
	wantErrorIs(t, "inserting a task with a negative attempt timeout", err, store.ErrInvalidArgument)
	// A task of a key is leased by a claim alone, which counts the lease.
	leased := claimLease(underKey(newTask("p", "s", "q", clockStart), "k", 1), "w", clockStart.Add(time.Hour), time.Time{})
	err = InsertTasks(b.ctx, b.s, []*store.Task{leased})
	wantErrorIs(t, "inserting a LEASED task under a key", err, store.ErrInvalidArgument)
	if err == nil || !strings.Contains(err.Error(), "a new task under a concurrency key must be QUEUED, not LEASED") {
		t.Errorf("inserting a LEASED task under a key: %v, want it to say the task must be QUEUED", err)
	}
	_, err = b.s.Create(b.ctx, store.CreateParams{ID: "c", Status: workflow.StatusRunning, Tasks: []*store.Task{
		claimLease(underKey(newTask("c", "s", "q", clockStart), "k", 1), "w", clockStart.Add(time.Hour), time.Time{})}})
	wantErrorIs(t, "creating an instance with a LEASED task under a key", err, store.ErrInvalidArgument)
	if tasks, err := b.engine(t).TasksOfInstance(b.ctx, "p"); err != nil || len(tasks) != 0 {
		t.Errorf("tasks after the refusals: %v, %v; want none", tasks, err)
	}
}

func testFlowControlPriorityOrder(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "p")
	sec := time.Second
	var tasks []*store.Task
	// The oldest task has the lowest priority; a tie of priorities goes
	// to the oldest.
	for i, p := range []int{1, 3, 5, 3, 5, 2} {
		tk := withID(fmt.Sprintf("t%d-p%d", i, p), newTask("p", fmt.Sprintf("s%d", i), "q", clockStart.Add(time.Duration(i-10)*sec)))
		tk.Flow.Priority = p
		tasks = append(tasks, tk)
	}
	tasks = append(tasks, withID("other-p4", newTask("p", "o", "q2", clockStart.Add(-20*sec))))
	tasks[len(tasks)-1].Flow.Priority = 4
	b.insertTasks(t, tasks...)
	if got := ids(claimAll(t, eq, []string{"q", "q2"}, clockStart, 1, nil)); !slices.Equal(got, []string{"t2-p5"}) {
		t.Errorf("a claim of one: %v, want the oldest of the highest priority, t2-p5", got)
	}
	want := []string{"t4-p5", "other-p4", "t1-p3", "t3-p3", "t5-p2", "t0-p1"}
	if got := ids(claimAll(t, eq, []string{"q", "q2"}, clockStart, 10, nil)); !slices.Equal(got, want) {
		t.Errorf("claim order %v, want %v (priority, then run_at, across queues)", got, want)
	}
}

func testFlowControlConcurrencyLimit(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.running(t, "b")
	tasks := keyedTasks("a", 5, "k", 2)
	// Another instance shares the key (keys span instances and
	// definitions); another key and a task without one are not held back.
	tasks = append(tasks,
		underKey(withID("kb", newTask("b", "s0", "q", clockStart.Add(-time.Minute))), "k", 2),
		underKey(withID("other", newTask("b", "s1", "q", clockStart.Add(-time.Minute))), "other", 1),
		withID("free", newTask("b", "s2", "q", clockStart.Add(-time.Minute))))
	b.insertTasks(t, tasks...)
	var held store.HeldBack
	got := ids(claimAll(t, eq, []string{"q"}, clockStart, 100, &held))
	slices.Sort(got)
	kGot := slices.DeleteFunc(slices.Clone(got), func(id string) bool { return id == "other" || id == "free" })
	if len(kGot) != 2 || !slices.Contains(got, "other") || !slices.Contains(got, "free") {
		t.Errorf("claimed %v: want two tasks of k, other and free", got)
	}
	if held.Concurrency != 4 {
		t.Errorf("held back %+v, want 4 tasks of k", held)
	}
	if n := b.leasedOf(t, "k", "a", "b"); n != 2 {
		t.Errorf("%d leased tasks of k, want 2", n)
	}
	if more := claimAll(t, eq, []string{"q"}, clockStart, 100, nil); len(more) != 0 {
		t.Errorf("a claim while k is at its limit got %v", ids(more))
	}
}

func testFlowControlSlotsFreed(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	var tasks []*store.Task
	for i := range 6 {
		tasks = append(tasks, underKey(withID(fmt.Sprintf("k%d", i), newTask("a", fmt.Sprintf("s%d", i), "q", clockStart.Add(time.Duration(i)*time.Millisecond-time.Minute))), "k", 1))
	}
	b.insertTasks(t, tasks...)
	claimOne := func(what string) *store.Task {
		t.Helper()
		got := claimAll(t, eq, []string{"q"}, clockStart, 10, nil)
		if len(got) != 1 {
			t.Fatalf("%s: claimed %v, want one task", what, ids(got))
		}
		if n := b.leasedOf(t, "k", "a"); n != 1 {
			t.Fatalf("%s: %d leased tasks of k, want 1", what, n)
		}
		if again := claimAll(t, eq, []string{"q"}, clockStart, 10, nil); len(again) != 0 {
			t.Fatalf("%s: a second claim got %v while the slot is taken", what, ids(again))
		}
		return got[0]
	}
	first := claimOne("first")
	b.finishTask(t, first, store.TaskDone, clockStart)
	second := claimOne("after a completion")
	b.finishTask(t, second, store.TaskFailed, clockStart)
	third := claimOne("after a failure")
	b.finishTask(t, third, store.TaskQueued, clockStart) // the lease expired
	fourth := claimOne("after a lease expiry")
	if fourth.ID == first.ID || fourth.ID == second.ID {
		t.Errorf("delivered %s again", fourth.ID)
	}
	// A cancel (the engine's, of a stopping instance or a withdrawn step)
	// frees the slot too.
	b.finishTask(t, fourth, store.TaskCancelled, clockStart)
	claimOne("after a cancel")
}

// testFlowControlConcurrentClaimers: claimers on their own connections claim
// and complete tasks of one key at once; the key never has more than its
// limit of leased tasks. Each claimer counts a task from its claim's
// return until just before its completion is sent — inside the time the
// row is LEASED — so the count can only be lower than the store's.
func testFlowControlConcurrentClaimers(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const (
		limit    = 3
		tasks    = 40
		claimers = 6
	)
	b.running(t, "a")
	b.running(t, "b")
	var all []*store.Task
	for i := range tasks {
		inst := []string{"a", "b"}[i%2]
		all = append(all, underKey(withID(fmt.Sprintf("k%02d", i), newTask(inst, fmt.Sprintf("s%d", i), "q", clockStart.Add(-time.Minute))), "k", limit))
	}
	b.insertTasks(t, all...)
	var leased, peak, done atomic.Int64
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Go(func() {
			for range 200 {
				if done.Load() == tasks {
					return
				}
				claimed, _, err := eq.ClaimTasks(b.ctx, claimOf(fmt.Sprint("w", w), []string{"q"}, clockStart, 2))
				got := claimedTasks(claimed)
				if err != nil && !errors.Is(err, store.ErrConflict) {
					t.Errorf("claimer %d: %v", w, err)
					return
				}
				if err != nil {
					continue
				}
				n := leased.Add(int64(len(got)))
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				for _, tk := range got {
					leased.Add(-1)
					b.finishTask(t, tk, store.TaskDone, clockStart)
					done.Add(1)
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("up to %d tasks of the key leased at once, limit %d", p, limit)
	}
	if n := done.Load(); n != tasks {
		t.Errorf("%d of %d tasks completed", n, tasks)
	}
}

func testFlowControlRateBucket(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.running(t, "b")
	var tasks []*store.Task
	for i := range 8 {
		tk := withID(fmt.Sprintf("r%d", i), newTask([]string{"a", "b"}[i%2], fmt.Sprintf("s%d", i), "q", clockStart.Add(time.Duration(i)*time.Millisecond-time.Minute)))
		tk.Flow.RateKey, tk.Flow.RatePerSecond, tk.Flow.RateBurst = "api", 2, 3
		tasks = append(tasks, tk)
	}
	b.insertTasks(t, tasks...)
	t0 := clockStart
	claim := func(at time.Duration, want int, what string) store.HeldBack {
		t.Helper()
		var held store.HeldBack
		if got := claimAll(t, eq, []string{"q"}, t0.Add(at), 10, &held); len(got) != want {
			t.Errorf("%s (at +%v): %d tasks delivered, want %d", what, at, len(got), want)
		}
		return held
	}
	held := claim(0, 3, "a full bucket")
	if held.RateEmptied != 1 || !held.RateRetryAt.Equal(store.Timestamp(t0).Add(500*time.Millisecond)) {
		t.Errorf("the claim that emptied the bucket reported %+v, want it emptied and a token due at +500ms", held)
	}
	claim(0, 0, "an empty bucket")
	claim(499*time.Millisecond, 0, "before the next token")
	claim(500*time.Millisecond, 1, "the next token")
	claim(999*time.Millisecond, 0, "before the one after")
	// Refilled for a long time: at most the burst.
	claim(time.Hour, 3, "a bucket refilled for an hour")
	claim(time.Hour, 0, "emptied again")
}

func testFlowControlGroupClaim(t *testing.T, h Harness) {
	b := setup(t, h)
	b.running(t, "a")
	b.insertTasks(t,
		underKey(withID("k0", newTask("a", "s0", "q", clockStart.Add(-time.Minute))), "k", 1),
		underKey(withID("k1", newTask("a", "s1", "q", clockStart.Add(-time.Minute+time.Millisecond))), "k", 1))
	claim := &store.GroupClaim{Params: claimOf("g", []string{"q"}, clockStart, 10)}
	if _, _, err := b.engine(t).ApplyGroup(b.ctx, nil, nil, claim); err != nil {
		t.Fatalf("ApplyGroup: %v", err)
	}
	got := claimedTasks(claim.Claimed)
	if !slices.Equal(ids(got), []string{"k0"}) || b.leasedOf(t, "k", "a") != 1 {
		t.Errorf("a group's claim leased %v, want k0 alone (limit 1)", ids(got))
	}
	if claim.HeldBack != (store.HeldBack{Concurrency: 1}) {
		t.Errorf("a group's claim reported %+v held back, want k1 (its key at its limit)", claim.HeldBack)
	}
}
