package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// readTasks returns every task of the instances, by id, as stored now.
func (b *bundle) readTasks(t testing.TB, eq store.TaskQuerier, instances ...string) map[string]*store.Task {
	t.Helper()
	all := map[string]*store.Task{}
	for _, id := range instances {
		for _, tk := range b.tasksOf(t, eq, id) {
			all[tk.ID] = tk
		}
	}
	return all
}

// tasksUnchanged fails t unless every task in before is still as it was.
func (b *bundle) tasksUnchanged(t testing.TB, eq store.TaskQuerier, what string, before map[string]*store.Task) {
	t.Helper()
	for id, tk := range before {
		assertTask(t, what+": task "+id, tk, b.lockTask(t, eq, id))
	}
}

// pick returns the tasks with these ids, in this order.
func pick(all map[string]*store.Task, ids ...string) []*store.Task {
	out := make([]*store.Task, len(ids))
	for i, id := range ids {
		out[i] = all[id]
	}
	return out
}

// held marks tk held (store.Task.Held), as the engine marks the tasks its
// instance's status holds, and returns it.
func held(tk *store.Task) *store.Task { tk.Held = true; return tk }

// newClaimFixture creates instances in every relevant status and tasks that
// a claim must or must not lock at clockStart, and returns them all.
func (b *bundle) newClaimFixture(t testing.TB, eq store.TaskQuerier) map[string]*store.Task {
	t.Helper()
	t0, sec := clockStart, time.Second
	b.running(t, "run")
	b.create(t, store.CreateParams{ID: "paused", Status: workflow.StatusPaused})
	b.create(t, store.CreateParams{ID: "pending"})
	b.running(t, "done")
	b.running(t, "failed")
	b.running(t, "timedout")
	b.insertTasks(t,
		withID("c1", newTask("run", "s1", "q1", t0.Add(-3*sec))),
		withID("c2", newTask("run", "s2", store.QueueHTTP, t0.Add(-2*sec))),
		// A tie on run_at, inserted out of id order.
		withID("c3b", newTask("run", "s3", "q1", t0.Add(-sec))),
		withID("c3a", newTask("run", "s4", "q1", t0.Add(-sec))),
		// run_at == now is due; one microsecond later is not.
		withID("c4", newTask("run", "s5", "q1", t0)),
		withID("late", newTask("run", "s6", "q1", store.Timestamp(t0).Add(time.Microsecond))),
		withID("q3", newTask("run", "s7", "q3", t0.Add(-5*sec))),
		withID("leased", newTask("run", "s8", "q1", t0.Add(-5*sec))),
		withID("finished", newTask("run", "s9", "q1", t0.Add(-5*sec))),
		withID("failedtask", newTask("run", "s10", "q1", t0.Add(-5*sec))),
		withID("sleep-run", newTask("run", "s11", store.QueueSleep, t0.Add(-4*sec))),
		// PAUSED: only timers run; the engine holds the others.
		withID("p-q1", held(newTask("paused", "s1", "q1", t0.Add(-5*sec)))),
		withID("p-sleep", newTask("paused", "s2", store.QueueSleep, t0.Add(-3500*time.Millisecond))),
		withID("p-http", held(newTask("paused", "s3", store.QueueHTTP, t0.Add(-5*sec)))),
	)
	// The other statuses hold every task (the engine cancels those of a
	// stopped instance; these were left QUEUED to show the flag is read).
	for _, inst := range []string{"pending", "done", "failed", "timedout"} {
		b.insertTasks(t,
			withID(inst+"-q1", held(newTask(inst, "s1", "q1", t0.Add(-5*sec)))),
			withID(inst+"-sleep", held(newTask(inst, "s2", store.QueueSleep, t0.Add(-5*sec)))),
		)
	}
	b.lease(t, eq, "leased", t0.Add(time.Minute))
	b.setTaskStatus(t, eq, "finished", store.TaskDone)
	b.setTaskStatus(t, eq, "failedtask", store.TaskFailed)
	b.transition(t, "done", workflow.StatusRunning, workflow.StatusCompleted)
	b.transition(t, "failed", workflow.StatusRunning, workflow.StatusFailed)
	b.transition(t, "timedout", workflow.StatusRunning, workflow.StatusTimedOut)
	return b.readTasks(t, eq, "run", "paused", "pending", "done", "failed", "timedout")
}

func testTasksClaimFilters(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	all := b.newClaimFixture(t, eq)
	// The filter uses the now it is given, never the store's clock.
	b.clock.Set(clockStart.Add(time.Hour))
	now := clockStart
	every := []string{"q1", "q3", store.QueueHTTP, store.QueueSleep}
	for _, c := range []struct {
		queues []string
		limit  int
		want   []string
	}{
		{every, 100, []string{"q3", "sleep-run", "p-sleep", "c1", "c2", "c3a", "c3b", "c4"}},
		{every, 3, []string{"q3", "sleep-run", "p-sleep"}},
		{every, 1, []string{"q3"}},
		{[]string{"q1"}, 100, []string{"c1", "c3a", "c3b", "c4"}},
		{[]string{"q1", store.QueueHTTP}, 100, []string{"c1", "c2", "c3a", "c3b", "c4"}},
		{[]string{store.QueueSleep}, 100, []string{"sleep-run", "p-sleep"}},
		{[]string{store.QueueHTTP}, 100, []string{"c2"}},
		{[]string{"nope"}, 100, []string{}},
		{[]string{"Q1"}, 100, []string{}},
	} {
		what := fmt.Sprintf("claim(%q, now, %d)", c.queues, c.limit)
		got, err := Claimable(b.ctx, eq, c.queues, now, c.limit)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		assertTasks(t, what, pick(all, c.want...), got)
	}
	// An earlier now sees less.
	got, err := Claimable(b.ctx, eq, []string{"q1"}, now.Add(-time.Second), 100)
	if err != nil {
		t.Fatalf("claim on the store: %v", err)
	}
	assertTasks(t, "claim on the store, one second earlier", pick(all, "c1", "c3a", "c3b"), got)
	// A later now sees the late task.
	got, err = Claimable(b.ctx, eq, []string{"q1"}, store.Timestamp(now).Add(time.Microsecond), 100)
	if err != nil {
		t.Fatalf("claim on the store: %v", err)
	}
	assertTasks(t, "claim one microsecond later", pick(all, "c1", "c3a", "c3b", "c4", "late"), got)
	// A claim that writes nothing changes nothing.
	b.tasksUnchanged(t, eq, "after claims that wrote nothing", all)

	// Bad arguments are the caller's mistake, not the database's.
	tooMany := make([]string, store.MaxClaimQueues+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("q%d", i)
	}
	for _, c := range []struct {
		queues []string
		limit  int
	}{{[]string{"q1"}, 0}, {[]string{"q1"}, store.MaxBatchLimit + 1}, {tooMany, 1}} {
		_, err := Claimable(b.ctx, eq, c.queues, now, c.limit)
		wantErrorIs(t, fmt.Sprintf("claim(%d queues, limit %d)", len(c.queues), c.limit), err, store.ErrInvalidArgument)
	}
	// The most queues allowed is fine.
	if _, err := Claimable(b.ctx, eq, tooMany[:store.MaxClaimQueues], now, 1); err != nil {
		t.Errorf("claim of %d queues: %v", store.MaxClaimQueues, err)
	}
}

// claimAndLease claims up to limit tasks of queue (one transaction), calls
// pause (when not nil) while holding them, leases them to owner and commits.
func (b *bundle) claimAndLease(queue string, now time.Time, limit int, owner string, pause func() error) ([]string, error) {
	var ids []string
	err := func() error {
		return b.s.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{queue}, Now: now, Limit: limit}, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
			if pause != nil {
				if err := pause(); err != nil {
					return nil, err
				}
			}
			var writes []*store.ClaimWrite
			for _, c := range locked {
				tk := c.Task
				tk.Status = store.TaskLeased
				tk.Attempt++
				tk.Lease = "lease-" + owner
				tk.LeaseOwner = owner
				tk.LeaseUntil = now.Add(time.Minute)
				writes = append(writes, &store.ClaimWrite{Tasks: []*store.Task{tk}})
				ids = append(ids, tk.ID)
			}
			return writes, nil
		})
	}()
	if ids == nil {
		ids = []string{}
	}
	return ids, err
}

// testTasksClaimConcurrent: two transactions claiming from the same queue at
// once, each holding its locks until both have claimed, never get the same
// task and together get all of them.
func testTasksClaimConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const n, limit = 50, 30
	inst := b.running(t, "inst")
	var tasks []*store.Task
	for i := range n {
		tasks = append(tasks, withID(fmt.Sprintf("t%02d", i), newTask(inst.ID, fmt.Sprintf("s%02d", i), "q1", clockStart.Add(time.Duration(i-n)*time.Millisecond))))
	}
	b.insertTasks(t, tasks...)
	owners := [2]string{"node-a", "node-b"}
	var (
		claims [2][]string
		errs   [2]error
	)
	if b.s.Capabilities().ConcurrentWriters {
		br := newBarrier(2)
		runConcurrently(2, func(i int) {
			claims[i], errs[i] = b.claimAndLease("q1", clockStart, limit, owners[i], br.wait)
		})
	} else {
		t.Log("the backend serialises transactions: the two claims run one after the other")
		for i := range 2 {
			claims[i], errs[i] = b.claimAndLease("q1", clockStart, limit, owners[i], nil)
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claimer %s: %v", owners[i], err)
		}
	}
	byID := map[string]string{}
	for i, ids := range claims {
		if len(ids) > limit {
			t.Errorf("claimer %s got %d tasks, limit is %d", owners[i], len(ids), limit)
		}
		if !slices.IsSorted(ids) {
			t.Errorf("claimer %s got %v: not in run_at order", owners[i], ids)
		}
		for _, id := range ids {
			if other, dup := byID[id]; dup {
				t.Errorf("task %s was claimed by %s and by %s", id, other, owners[i])
			}
			byID[id] = owners[i]
		}
	}
	t.Logf("claimed %d and %d tasks", len(claims[0]), len(claims[1]))
	if len(byID) != n {
		t.Errorf("the claimers got %d distinct tasks together, want all %d", len(byID), n)
	}
	for _, tk := range b.tasksOf(t, eq, inst.ID) {
		if tk.Status != store.TaskLeased || tk.LeaseOwner != byID[tk.ID] || tk.Attempt != 1 {
			t.Errorf("task %s: status %s, owner %q, attempt %d; want LEASED, %q, 1", tk.ID, tk.Status, tk.LeaseOwner, tk.Attempt, byID[tk.ID])
		}
	}
	// Nothing is left to claim.
	if ids, err := b.claimAndLease("q1", clockStart, limit, "late", nil); err != nil || len(ids) != 0 {
		t.Errorf("a third claim = %v, %v; want nothing", ids, err)
	}
}
