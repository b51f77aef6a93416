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

// claimIDs claims as Claim does and returns the ids of the tasks leased,
// failing t on error.
func (b *bundle) claimIDs(t testing.TB, eq store.TaskQuerier, queues []string, now time.Time, limit int) []string {
	t.Helper()
	got, err := Claim(b.ctx, eq, queues, now, limit)
	if err != nil {
		t.Fatalf("claim(%q, %v, %d): %v", queues, now, limit, err)
	}
	return taskIDs(got)
}

// testTasksClaimFilters: a claim takes the QUEUED, due tasks of its queues
// that are not held, in run_at order (ties by id), at most its limit, and
// never again once leased; due means at the now it is given, never the
// store's clock.
func testTasksClaimFilters(t *testing.T, h Harness) {
	every := []string{"q1", "q3", store.QueueHTTP, store.QueueSleep}
	unclaimable := []string{"leased", "finished", "failedtask", "p-q1", "p-http", "pending-q1", "pending-sleep",
		"done-q1", "done-sleep", "failed-q1", "failed-sleep", "timedout-q1", "timedout-sleep"}
	type claim struct {
		queues []string
		now    time.Time
		limit  int
		want   []string
	}
	// Each sequence of claims runs on a fixture of its own: a claim leases
	// what it takes.
	for _, seq := range []struct {
		name      string
		claims    []claim
		untouched []string
	}{
		{"limits", []claim{
			{every, clockStart, 1, []string{"q3"}},
			{every, clockStart, 3, []string{"sleep-run", "p-sleep", "c1"}},
			{every, clockStart, 100, []string{"c2", "c3a", "c3b", "c4"}},
			{every, clockStart, 100, []string{}},
		}, append([]string{"late"}, unclaimable...)},
		{"queues and now", []claim{
			{[]string{"nope"}, clockStart, 100, []string{}},
			{[]string{"Q1"}, clockStart, 100, []string{}},
			{[]string{store.QueueHTTP}, clockStart, 100, []string{"c2"}},
			{[]string{store.QueueSleep}, clockStart, 100, []string{"sleep-run", "p-sleep"}},
			// An earlier now sees less; run_at == now is due, a microsecond later is not.
			{[]string{"q1"}, clockStart.Add(-time.Second), 100, []string{"c1", "c3a", "c3b"}},
			{[]string{"q1"}, clockStart, 100, []string{"c4"}},
			{[]string{"q1", store.QueueHTTP}, store.Timestamp(clockStart).Add(time.Microsecond), 100, []string{"late"}},
		}, append([]string{"q3"}, unclaimable...)},
	} {
		t.Run(seq.name, func(t *testing.T) {
			b := setup(t, h)
			eq := b.engine(t)
			all := b.newClaimFixture(t, eq)
			b.clock.Set(clockStart.Add(time.Hour))
			for _, c := range seq.claims {
				if got := b.claimIDs(t, eq, c.queues, c.now, c.limit); !slices.Equal(got, c.want) {
					t.Errorf("claim(%q, %v, limit %d) = %v, want %v", c.queues, c.now, c.limit, got, c.want)
				}
			}
			for _, id := range seq.untouched {
				assertTask(t, "task "+id+", not claimed", all[id], b.lockTask(t, eq, id))
			}
		})
	}
}

// testTasksClaimConcurrent: two claimers claiming from the same queue at
// once, until nothing is left, never get the same task, each claim in
// run_at order, and together get all of them.
func testTasksClaimConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const n, limit = 50, 7
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
	runConcurrently(2, func(i int) {
		for {
			got, _, err := eq.ClaimTasks(b.ctx, claimOf(owners[i], []string{"q1"}, clockStart, limit))
			ids := taskIDs(claimedTasks(got))
			switch {
			case err != nil:
				errs[i] = err
				return
			case len(ids) > limit || !slices.IsSorted(ids):
				errs[i] = fmt.Errorf("a claim of %d got %v: over the limit or not in run_at order", limit, ids)
			}
			claims[i] = append(claims[i], ids...)
			if len(ids) == 0 {
				return
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claimer %s: %v", owners[i], err)
		}
	}
	byID := map[string]string{}
	for i, ids := range claims {
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
}
