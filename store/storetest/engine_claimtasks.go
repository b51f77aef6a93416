package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Conformance of store.TaskQuerier.ClaimTasks: the claim the engine's
// workers make, which leases the tasks it takes (store.Task.Deliver) in
// one transaction, returns them with their instances as read and never
// writes an instance.

var claimTaskTests = []conformanceTest{
	{"ClaimTasks_lease", testClaimTasksLease},
	{"ClaimTasks_instanceNotWritten", testClaimTasksInstanceNotWritten},
	{"ClaimTasks_invalid", testClaimTasksInvalid},
	{"ClaimTasks_concurrent", testClaimTasksConcurrent},
}

// claimLease leases tk to owner as a write of the engine would (a task
// inserted leased, a test's fixture), with a lease token of its own.
func claimLease(tk *store.Task, owner string, until, deadline time.Time) *store.Task {
	tk.Status = store.TaskLeased
	tk.Attempt++
	tk.Lease = "lease-" + owner + "-" + tk.ID
	tk.LeaseOwner = owner
	tk.LeaseUntil = until
	tk.AttemptDeadline = deadline
	return tk
}

// claimOf are the parameters of a claim of up to limit tasks of queues at
// now, leased to owner for a minute.
func claimOf(owner string, queues []string, now time.Time, limit int) store.ClaimParams {
	return store.ClaimParams{Queues: queues, Now: now, Limit: limit, Owner: owner, Lease: time.Minute}
}

// claimedTasks returns the tasks of a claim's result, in order.
func claimedTasks(claimed []store.Claimable) []*store.Task {
	out := make([]*store.Task, len(claimed))
	for i, c := range claimed {
		out[i] = c.Task
	}
	return out
}

// delivered is before as store.Task.Deliver leases it at now for lease
// under the token given, with the times as the store keeps them and
// updatedAt the store's clock.
func delivered(before *store.Task, owner, token string, now time.Time, lease time.Duration, updatedAt time.Time) *store.Task {
	want := *before
	want.Deliver(owner, token, now, lease)
	want.LeaseUntil, want.AttemptDeadline = store.Timestamp(want.LeaseUntil), store.Timestamp(want.AttemptDeadline)
	want.UpdatedAt = store.Timestamp(updatedAt)
	return &want
}

// testClaimTasksLease: each task a claim takes is leased as
// store.Task.Deliver leases it — its attempt counted, LEASED to the owner
// under a fresh token of its own, the lease ending after p.Lease or at the
// attempt's deadline (AttemptTimeout after p.Now), whichever is first —
// stamped with the store's clock, and returned as stored.
func testClaimTasksLease(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.running(t, "b")
	short := withID("short", newTask("a", "s2", "q1", clockStart.Add(-3*time.Second)))
	short.AttemptTimeout = 10*time.Second + 250*time.Microsecond // ends the lease before p.Lease does
	long := withID("long", newTask("a", "s3", "q1", clockStart.Add(-2*time.Second)))
	long.AttemptTimeout = time.Hour
	retried := withID("retried", newTask("b", "s1", "q1", clockStart.Add(-4*time.Second)))
	retried.Attempt = 2 // re-queued after two attempts
	b.insertTasks(t, retried, short, long,
		withID("plain", newTask("a", "s1", "q1", clockStart.Add(-time.Second))),
		withID("later", newTask("b", "s2", "q1", clockStart.Add(time.Second))))
	before := b.readTasks(t, eq, "a", "b")
	storeClock := b.clock.Set(clockStart.Add(time.Hour)) // stamps the leases, never decides what is due
	p := claimOf("node-1", []string{"q1"}, clockStart, 10)
	p.Lease = time.Minute + 1500*time.Nanosecond // kept to the microsecond
	claimed, _, err := eq.ClaimTasks(b.ctx, p)
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	got := claimedTasks(claimed)
	if ids := taskIDs(got); !slices.Equal(ids, []string{"retried", "short", "long", "plain"}) {
		t.Fatalf("claimed %v, want the due tasks in run_at order", ids)
	}
	tokens := map[string]string{}
	for _, tk := range got {
		want := delivered(before[tk.ID], "node-1", tk.Lease, p.Now, p.Lease, storeClock)
		assertTask(t, "task "+tk.ID+" as returned", want, tk)
		assertTask(t, "task "+tk.ID+" as stored", tk, b.lockTask(t, eq, tk.ID))
		if tk.AttemptTimeout != before[tk.ID].AttemptTimeout {
			t.Errorf("task %s: attempt timeout %v after the claim, want %v (never changed)", tk.ID, tk.AttemptTimeout, before[tk.ID].AttemptTimeout)
		}
		if other, dup := tokens[tk.Lease]; tk.Lease == "" || dup {
			t.Errorf("task %s leased under token %q (also %s's): want a fresh token each", tk.ID, tk.Lease, other)
		}
		tokens[tk.Lease] = tk.ID
	}
	// The values, spelled out for two of them.
	byID := map[string]*store.Task{}
	for _, tk := range got {
		byID[tk.ID] = tk
	}
	if tk := byID["retried"]; tk.Attempt != 3 || tk.Status != store.TaskLeased || tk.LeaseOwner != "node-1" ||
		!tk.LeaseUntil.Equal(store.Timestamp(clockStart.Add(p.Lease))) || !tk.AttemptDeadline.IsZero() {
		t.Errorf("retried after the claim: %+v; want attempt 3, LEASED to node-1 for the lease, no deadline", tk)
	}
	if tk, end := byID["short"], store.Timestamp(clockStart.Add(short.AttemptTimeout)); !tk.LeaseUntil.Equal(end) || !tk.AttemptDeadline.Equal(end) {
		t.Errorf("short after the claim: lease until %v, deadline %v; want both at the attempt's deadline %v", tk.LeaseUntil, tk.AttemptDeadline, end)
	}
	assertTask(t, "a task not yet due", before["later"], b.lockTask(t, eq, "later"))

	// A later claim takes the task that became due, under another token.
	again, _, err := eq.ClaimTasks(b.ctx, claimOf("node-2", []string{"q1"}, clockStart.Add(time.Second), 10))
	if err != nil || len(again) != 1 || again[0].Task.ID != "later" {
		t.Fatalf("a second claim = %v, %v; want the later task", taskIDs(claimedTasks(again)), err)
	}
	if tk := again[0].Task; tk.LeaseOwner != "node-2" || tk.Attempt != 1 || tokens[tk.Lease] != "" {
		t.Errorf("the later task: owner %q, attempt %d, token %q; want node-2, 1, a token not used before", tk.LeaseOwner, tk.Attempt, tk.Lease)
	}
	// Nothing is left: a claim that finds nothing returns an empty result.
	if none, _, err := eq.ClaimTasks(b.ctx, claimOf("node-3", []string{"q1"}, clockStart.Add(time.Hour), 10)); err != nil || len(none) != 0 {
		t.Errorf("a claim with nothing due = %v, %v; want nothing", taskIDs(claimedTasks(none)), err)
	}
}

// testClaimTasksInstanceNotWritten: a claim returns each task with its
// instance as stored, tasks of one instance sharing it, and writes no
// instance — no version, no history row, no state change — whatever the
// instance's status (a PAUSED instance's timers are claimed too).
func testClaimTasksInstanceNotWritten(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	all := b.newClaimFixture(t, eq)
	run, paused := b.snapshot(t, "run"), b.snapshot(t, "paused")
	b.clock.Set(clockStart.Add(time.Hour))
	claimed, _, err := eq.ClaimTasks(b.ctx, claimOf("node", []string{"q1", "q3", store.QueueHTTP, store.QueueSleep}, clockStart, 100))
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	if ids := taskIDs(claimedTasks(claimed)); !slices.Equal(ids, []string{"q3", "sleep-run", "p-sleep", "c1", "c2", "c3a", "c3b", "c4"}) {
		t.Errorf("claimed %v", ids)
	}
	shared := map[string]*workflow.Instance{}
	for _, c := range claimed {
		if c.Instance == nil || c.Instance.ID != c.Task.InstanceID {
			t.Errorf("task %s came with instance %v, want its instance %s", c.Task.ID, c.Instance, c.Task.InstanceID)
			continue
		}
		if diff := cmp.Diff(viewOf(b.get(t, c.Instance.ID)), viewOf(c.Instance)); diff != "" {
			t.Errorf("task %s: its instance as returned (-stored +returned):\n%s", c.Task.ID, diff)
		}
		if first, ok := shared[c.Instance.ID]; ok && first != c.Instance {
			t.Errorf("task %s: its instance is not the one its instance's other tasks share", c.Task.ID)
		}
		shared[c.Instance.ID] = c.Instance
	}
	b.unchanged(t, "the running instance whose tasks were claimed", run)
	b.unchanged(t, "the paused instance whose timer was claimed", paused)
	for _, id := range []string{"late", "leased", "finished", "failedtask", "p-q1", "p-http", "pending-q1", "done-sleep"} {
		assertTask(t, "task "+id+", not claimable", all[id], b.lockTask(t, eq, id))
	}
}

// testClaimTasksInvalid: parameters a claim refuses, each with its message;
// nothing is leased, and the tasks can be claimed afterwards.
func testClaimTasksInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.insertTasks(t, withID("ta1", newTask("a", "a", "q1", clockStart.Add(-time.Second))))
	before := b.readTasks(t, eq, "a")
	snap := b.snapshot(t, "a")
	tooMany := make([]string, store.MaxClaimQueues+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("q%d", i)
	}
	valid := claimOf("node", []string{"q1"}, clockStart, 1)
	for _, c := range []struct {
		name   string
		change func(p *store.ClaimParams)
		msg    string
	}{
		{"limit 0", func(p *store.ClaimParams) { p.Limit = 0 }, fmt.Sprintf("limit 0 is outside 1–%d", store.MaxBatchLimit)},
		{"a limit too high", func(p *store.ClaimParams) { p.Limit = store.MaxBatchLimit + 1 },
			fmt.Sprintf("limit %d is outside 1–%d", store.MaxBatchLimit+1, store.MaxBatchLimit)},
		{"too many queues", func(p *store.ClaimParams) { p.Queues = tooMany },
			fmt.Sprintf("%d queues, at most %d may be claimed from at once", len(tooMany), store.MaxClaimQueues)},
		{"no owner", func(p *store.ClaimParams) { p.Owner = "" }, "a claim without an owner"},
		{"no lease", func(p *store.ClaimParams) { p.Lease = 0 }, "a claim's lease of 0s is not positive"},
		{"a negative lease", func(p *store.ClaimParams) { p.Lease = -time.Second }, "a claim's lease of -1s is not positive"},
	} {
		p := valid
		c.change(&p)
		claimed, _, err := eq.ClaimTasks(b.ctx, p)
		wantErrorIs(t, "ClaimTasks, "+c.name, err, store.ErrInvalidArgument)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ClaimTasks, %s: %v, want it to say %q", c.name, err, c.msg)
		}
		if len(claimed) != 0 {
			t.Errorf("ClaimTasks, %s: returned %v", c.name, taskIDs(claimedTasks(claimed)))
		}
		b.tasksUnchanged(t, eq, c.name, before)
	}
	b.unchanged(t, "the instance after the refused claims", snap)
	// The most queues allowed is fine, and the task is still claimable.
	p := valid
	p.Queues = append(tooMany[:store.MaxClaimQueues-1:store.MaxClaimQueues-1], "q1")
	if claimed, _, err := eq.ClaimTasks(b.ctx, p); err != nil || len(claimed) != 1 {
		t.Errorf("a claim of %d queues = %v, %v; want ta1", len(p.Queues), taskIDs(claimedTasks(claimed)), err)
	}
}

// testClaimTasksConcurrent: claimers racing over the tasks of a few
// instances lease every task exactly once, each under a token of its own,
// and write no instance.
func testClaimTasksConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const instances, perInstance, claimers, limit = 6, 8, 8, 3
	snaps := map[string]snapshot{}
	for i := range instances {
		id := fmt.Sprintf("i%d", i)
		var tasks []*store.Task
		for j := range perInstance {
			tasks = append(tasks, withID(fmt.Sprintf("%s-t%d", id, j), newTask(id, fmt.Sprintf("s%d", j), "q1", clockStart.Add(-time.Duration(i+j*instances)*time.Millisecond))))
		}
		b.runningWith(t, id, tasks...)
		snaps[id] = b.snapshot(t, id)
	}
	var (
		mu     sync.Mutex
		leased = map[string]*store.Task{} // task → as claimed
		tokens = map[string]bool{}
		errs   []error
	)
	runConcurrently(claimers, func(i int) {
		owner := fmt.Sprintf("c%d", i)
		for range 100 {
			claimed, _, err := eq.ClaimTasks(b.ctx, claimOf(owner, []string{"q1"}, clockStart, limit))
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			for _, c := range claimed {
				tk := c.Task
				if other, dup := leased[tk.ID]; dup {
					errs = append(errs, fmt.Errorf("task %s leased by %s and by %s", tk.ID, other.LeaseOwner, owner))
				}
				if tokens[tk.Lease] {
					errs = append(errs, fmt.Errorf("task %s leased under token %q, given before", tk.ID, tk.Lease))
				}
				leased[tk.ID], tokens[tk.Lease] = tk, true
			}
			mu.Unlock()
			if err != nil || len(claimed) == 0 {
				return
			}
		}
	})
	for _, err := range errs {
		t.Error(err)
	}
	if len(leased) != instances*perInstance {
		t.Errorf("%d tasks leased, want all %d", len(leased), instances*perInstance)
	}
	for id, snap := range snaps {
		b.unchanged(t, "instance "+id, snap)
		for _, tk := range b.tasksOf(t, eq, id) {
			assertTask(t, "task "+tk.ID+" as stored after the race", leased[tk.ID], tk)
			if tk.Status != store.TaskLeased || tk.Attempt != 1 {
				t.Errorf("task %s: %s, attempt %d; want LEASED, 1", tk.ID, tk.Status, tk.Attempt)
			}
		}
	}
}
