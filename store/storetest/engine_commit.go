package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// CommitStep: a lease holder's whole change as one atomic, versioned write.

var commitTests = []conformanceTest{
	{"CommitStep_ok", testCommitStepOK},
	{"CommitStep_conflicts", testCommitStepConflicts},
	{"CommitStep_invalid", testCommitStepInvalid},
	{"CommitStep_inTx", testCommitStepInTx},
	{"CommitStep_concurrent", testCommitStepConcurrent},
	{"Create_withTasks", testCreateWithTasks},
	{"Create_latestRevision", testCreateLatestRevision},
	{"CommitSteps_ok", testCommitStepsOK},
	{"CommitSteps_allOrNothing", testCommitStepsAllOrNothing},
	{"CommitGroup_ok", testCommitGroupOK},
	{"CommitGroup_allOrNothing", testCommitGroupAllOrNothing},
}

// commitFixture creates a RUNNING instance id with stepState (step a
// RUNNING) and a task for a, leased until an hour from now; it returns the
// instance and the leased task.
func (b *bundle) commitFixture(t testing.TB, eq store.EngineQuerier, id string) (*workflow.Instance, *store.Task) {
	t.Helper()
	inst := b.runningWith(t, id, withID(id+"-a", newTask(id, "a", "q1", clockStart)))
	tk := b.lease(t, eq, id+"-a", b.clock.Now().Add(time.Hour))
	return inst, tk
}

// completion returns the commit a worker makes when step a of inst
// completes and schedules step b: task done, a COMPLETED, b RUNNING with a
// new task.
func completion(inst *workflow.Instance, tk *store.Task, now time.Time) (store.StepCommit, *store.Task) {
	state := inst.State.Clone()
	state.Steps["a"].Status = workflow.StepCompleted
	state.Steps["a"].Output = json.RawMessage(`{"done":9007199254740993}`)
	state.Steps["a"].Error = ""
	state.Steps["b"].Status = workflow.StepRunning
	done := *tk
	done.Status, done.LastError = store.TaskDone, ""
	done.Lease, done.LeaseOwner, done.LeaseUntil, done.AttemptDeadline = "", "", time.Time{}, time.Time{}
	next := withID(inst.ID+"-b", newTask(inst.ID, "b", "q1", now))
	return store.StepCommit{
		Task: &done, Lease: tk.Lease, Now: now,
		ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status, State: state,
		Cause: "step a completed", Insert: []*store.Task{next}, Notify: true,
	}, next
}

func testCommitStepOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, tk := b.commitFixture(t, eq, "w")
	inst = b.get(t, inst.ID)
	now := b.clock.Advance(time.Second)
	c, next := completion(inst, tk, now)
	wantDone := *c.Task
	version, err := eq.CommitStep(b.ctx, c)
	if err != nil {
		t.Fatalf("CommitStep: %v", err)
	}
	if version != inst.Version+1 {
		t.Errorf("CommitStep returned version %d, want %d", version, inst.Version+1)
	}
	got := b.get(t, inst.ID)
	if got.Version != version || got.Status != workflow.StatusRunning {
		t.Errorf("after CommitStep: version %d, status %s; want %d, RUNNING", got.Version, got.Status, version)
	}
	checkTime(t, "updated_at after CommitStep", got.UpdatedAt, now)
	assertState(t, "state after CommitStep", c.State, got.State)
	h1 := b.history(t, inst.ID)
	if last := h1[len(h1)-1]; last.Version != version || last.Cause != "step a completed" {
		t.Errorf("last history entry: version %d, cause %q; want %d, %q", last.Version, last.Cause, version, "step a completed")
	} else {
		assertState(t, "history state of the commit", c.State, last.State)
	}

	// The task row is the new one, and the caller's copy says what was stored.
	wantDone.UpdatedAt = store.Timestamp(now)
	assertTask(t, "committed task", &wantDone, b.lockTask(t, eq, tk.ID))
	assertTask(t, "the caller's committed task", &wantDone, c.Task)
	// The new task is inserted as Apply inserts, and completed likewise.
	assertTask(t, "inserted task", stored(next, now), b.lockTask(t, eq, next.ID))
	assertTask(t, "the caller's inserted task", stored(next, now), next)

	// The same commit again: the task is no longer leased under that lease.
	again, _ := completion(inst, tk, now)
	again.Insert = nil
	_, err = eq.CommitStep(b.ctx, again)
	wantErrorIs(t, "CommitStep repeated", err, store.ErrConflict)

	// A commit without new tasks and a status change: the last step ends
	// the instance.
	b.runningWith(t, "w2", withID("w2-a", newTask("w2", "a", "q1", now)))
	tk2 := b.lease(t, eq, "w2-a", now.Add(time.Hour))
	inst2 := b.get(t, "w2")
	c2, _ := completion(inst2, tk2, now)
	c2.Insert, c2.Notify, c2.Status = nil, false, workflow.StatusCompleted
	if v, err := eq.CommitStep(b.ctx, c2); err != nil || v != inst2.Version+1 {
		t.Fatalf("CommitStep completing w2 = %d, %v; want %d, nil", v, err, inst2.Version+1)
	}
	if got := b.get(t, "w2"); got.Status != workflow.StatusCompleted {
		t.Errorf("w2 is %s after a completing commit, want COMPLETED", got.Status)
	}
}

func testCommitStepConflicts(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, inst *workflow.Instance, tk *store.Task) // another writer, after the read
		change func(c *store.StepCommit)                                   // what the committer got wrong
	}{
		{name: "stale lease", change: func(c *store.StepCommit) { c.Lease = "not-the-lease" }},
		{name: "lease ended", change: func(c *store.StepCommit) { c.Now = c.Now.Add(2 * time.Hour) }},
		{name: "lease ends at now", before: func(t *testing.T, _ *workflow.Instance, tk *store.Task) {
			tk.LeaseUntil = b.clock.Now()
			b.updateTask(t, tk)
		}},
		{name: "task released", before: func(t *testing.T, _ *workflow.Instance, tk *store.Task) {
			b.setTaskStatus(t, eq, tk.ID, store.TaskQueued)
		}},
		{name: "instance moved on", before: func(t *testing.T, inst *workflow.Instance, _ *store.Task) {
			if _, err := b.s.ReplaceState(b.ctx, inst.ID, inst.Version, inst.State, "someone else"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "instance paused", before: func(t *testing.T, inst *workflow.Instance, _ *store.Task) {
			b.transition(t, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
		}},
		{name: "wrong status at that version", change: func(c *store.StepCommit) {
			c.From, c.Status = workflow.StatusPaused, workflow.StatusPaused
		}},
		{name: "task of another instance", change: func(c *store.StepCommit) {
			c.Task.InstanceID = "other"
			c.Insert[0].InstanceID = "other"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("c%d", b.countAll(t))
			_, tk := b.commitFixture(t, eq, id)
			inst := b.get(t, id)
			c, next := completion(inst, tk, b.clock.Now())
			if tc.before != nil {
				tc.before(t, inst, b.lockTask(t, eq, tk.ID))
			}
			if tc.change != nil {
				tc.change(&c)
			}
			snap := b.snapshot(t, id)
			task := b.lockTask(t, eq, tk.ID)
			caller := *c.Task
			_, err := eq.CommitStep(b.ctx, c)
			var ce *store.ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("CommitStep = %v, want a *store.ConflictError", err)
			}
			b.unchanged(t, "after a conflicting CommitStep", snap)
			assertTask(t, "task after a conflicting CommitStep", task, b.lockTask(t, eq, tk.ID))
			assertTask(t, "the caller's task after a conflicting CommitStep", &caller, c.Task)
			if _, err := eq.Task(b.ctx, next.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the new task of a conflicting CommitStep: Task = %v, want ErrNotFound", err)
			}
		})
	}
}

func testCommitStepInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, tk := b.commitFixture(t, eq, "w")
	b.insertTasks(t, withID("w-c", newTask(inst.ID, "c", "q1", clockStart)))
	inst = b.get(t, inst.ID)
	now := b.clock.Now()
	for _, tc := range []struct {
		name   string
		change func(c *store.StepCommit)
		want   error
	}{
		{"nil task", func(c *store.StepCommit) { c.Task = nil }, store.ErrInvalidArgument},
		{"no lease", func(c *store.StepCommit) { c.Lease = "" }, store.ErrInvalidArgument},
		{"bad task status", func(c *store.StepCommit) { c.Task.Status = "NOPE" }, store.ErrInvalidArgument},
		{"bad task input", func(c *store.StepCommit) { c.Task.Input = json.RawMessage(`{`) }, store.ErrInvalidArgument},
		{"terminal from", func(c *store.StepCommit) {
			c.From, c.Status = workflow.StatusCompleted, workflow.StatusCompleted
		}, workflow.ErrTerminal},
		{"transition refused", func(c *store.StepCommit) { c.Status = workflow.StatusPending }, workflow.ErrInvalidTransition},
		{"invalid state", func(c *store.StepCommit) { c.State.Steps["a"].Status = "BOGUS" }, workflow.ErrInvalidState},
		{"nil new task", func(c *store.StepCommit) { c.Insert = append(c.Insert, nil) }, store.ErrInvalidArgument},
		{"new task of another instance", func(c *store.StepCommit) { c.Insert[0].InstanceID = "other" }, store.ErrInvalidArgument},
		{"bad new task", func(c *store.StepCommit) { c.Insert[0].MaxAttempts = 0 }, store.ErrInvalidArgument},
		{"new task's step taken", func(c *store.StepCommit) { c.Insert[0].StepID = "c" }, store.ErrExists},
		{"new task's id taken", func(c *store.StepCommit) { c.Insert[0].ID = "w-c" }, store.ErrExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := completion(inst, tk, now)
			tc.change(&c)
			snap := b.snapshot(t, inst.ID)
			_, err := eq.CommitStep(b.ctx, c)
			wantErrorIs(t, "CommitStep with "+tc.name, err, tc.want)
			b.unchanged(t, "after CommitStep with "+tc.name, snap)
			assertTask(t, "task after CommitStep with "+tc.name, tk, b.lockTask(t, eq, tk.ID))
			if n := len(b.tasksOf(t, eq, inst.ID)); n != 2 {
				t.Errorf("instance has %d tasks after CommitStep with %s, want 2", n, tc.name)
			}
		})
	}
}

// Inside a transaction, a commit is part of it: rolled back with it.
func testCommitStepInTx(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst, tk := b.commitFixture(t, eq, "w")
	inst = b.get(t, inst.ID)
	snap := b.snapshot(t, inst.ID)
	task := b.lockTask(t, eq, tk.ID)
	rollback := errors.New("roll back")
	err := b.inEngineTx(func(_ store.Querier, teq store.EngineQuerier) error {
		c, _ := completion(inst, tk, b.clock.Now())
		if _, err := teq.CommitStep(b.ctx, c); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("WithTx = %v, want the rollback error", err)
	}
	b.unchanged(t, "after a rolled back CommitStep", snap)
	assertTask(t, "task after a rolled back CommitStep", task, b.lockTask(t, eq, tk.ID))
	if n := len(b.tasksOf(t, eq, inst.ID)); n != 1 {
		t.Errorf("instance has %d tasks after a rolled back CommitStep, want 1", n)
	}
	// And committed with it.
	err = b.inEngineTx(func(_ store.Querier, teq store.EngineQuerier) error {
		c, _ := completion(inst, tk, b.clock.Now())
		_, err := teq.CommitStep(b.ctx, c)
		return err
	})
	if err != nil {
		t.Fatalf("CommitStep in WithTx: %v", err)
	}
	if got := b.get(t, inst.ID); got.Version != inst.Version+1 {
		t.Errorf("version %d after CommitStep in a committed transaction, want %d", got.Version, inst.Version+1)
	}
}

// Parallel steps of one instance complete at once, each from the instance
// as its worker read it: at each version exactly one commit lands, the others
// conflict and change nothing, and a loser that reads again and retries gets
// in later. At the end every step is completed (no completion overwrote
// another: no lost update), every task is DONE, and the versions and the
// history are contiguous.
func testCommitStepConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const steps = 12
	state := workflow.State{Steps: map[string]*workflow.StepState{}}
	var tasks []*store.Task
	for i := range steps {
		step := fmt.Sprintf("s%02d", i)
		state.Steps[step] = &workflow.StepState{Status: workflow.StepRunning}
		tasks = append(tasks, withID("t-"+step, newTask("w", step, "q1", clockStart)))
	}
	b.create(t, store.CreateParams{ID: "w", Status: workflow.StatusRunning, State: state, Tasks: tasks})
	for i, tk := range tasks {
		tasks[i] = b.lease(t, eq, tk.ID, b.clock.Now().Add(time.Hour))
	}

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		versions  = map[int64]string{}
		conflicts int
	)
	start := make(chan struct{})
	for _, tk := range tasks {
		wg.Go(func() {
			<-start
			for attempt := 0; ; attempt++ {
				if attempt == 1000 {
					t.Errorf("task %s: no commit after 1000 attempts", tk.ID)
					return
				}
				inst, err := b.s.Get(b.ctx, "w")
				if err != nil {
					t.Error(err)
					return
				}
				state := inst.State.Clone()
				state.Steps[tk.StepID].Status = workflow.StepCompleted
				done := *tk
				done.Status, done.Lease, done.LeaseOwner, done.LeaseUntil = store.TaskDone, "", "", time.Time{}
				v, err := eq.CommitStep(b.ctx, store.StepCommit{Task: &done, Lease: tk.Lease, Now: b.clock.Now(),
					ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status, State: state, Cause: "done " + tk.StepID})
				mu.Lock()
				switch {
				case err == nil:
					if other, dup := versions[v]; dup {
						t.Errorf("version %d committed twice: by %s and %s", v, other, tk.StepID)
					}
					versions[v] = tk.StepID
				case errors.Is(err, store.ErrConflict):
					conflicts++
				default:
					t.Errorf("CommitStep of %s: %v", tk.StepID, err)
				}
				mu.Unlock()
				if !errors.Is(err, store.ErrConflict) {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d commits, %d conflicts", len(versions), conflicts)

	final := b.get(t, "w")
	if final.Version != steps || len(versions) != steps {
		t.Errorf("final version %d with %d successful commits, want %d and %d", final.Version, len(versions), steps, steps)
	}
	for step, st := range final.State.Steps {
		if st.Status != workflow.StepCompleted {
			t.Errorf("step %s is %s at the end: a completion was lost", step, st.Status)
		}
	}
	for _, tk := range tasks {
		if got := b.lockTask(t, eq, tk.ID); got.Status != store.TaskDone {
			t.Errorf("task %s is %s at the end, want DONE", tk.ID, got.Status)
		}
	}
	h1 := b.history(t, "w")
	for i, e := range h1 {
		if e.Version != int64(i) {
			t.Fatalf("history versions are not contiguous: entry %d has version %d", i, e.Version)
		}
		if i > 0 && e.Cause != "done "+versions[e.Version] {
			t.Errorf("history version %d has cause %q, but %s committed it", e.Version, e.Cause, versions[e.Version])
		}
	}
}

// The engine starts a workflow with its first tasks in one write.
func testCreateWithTasks(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	now := b.clock.Advance(time.Second)
	first := withID("t-a", newTask("", "a", "q1", now))
	second := newTask("w", "b", store.QueueSleep, now.Add(time.Minute))
	inst, err := b.s.Create(b.ctx, store.CreateParams{ID: "w", Status: workflow.StatusRunning, State: stepState(),
		Tasks: []*store.Task{first, second}, Notify: true})
	if err != nil {
		t.Fatalf("Create with tasks: %v", err)
	}
	assertInstance(t, "Create with tasks", b.get(t, "w"), inst)
	if first.InstanceID != "w" || second.ID == "" {
		t.Errorf("the caller's tasks were not filled in: %+v, %+v", first, second)
	}
	assertTasks(t, "tasks created with the instance", []*store.Task{stored(first, now), stored(second, now)}, b.tasksOf(t, eq, "w"))
	assertTask(t, "the caller's first task", stored(first, now), first)

	// Nothing at all when any part fails.
	for _, tc := range []struct {
		name  string
		id    string
		tasks []*store.Task
		want  error
	}{
		{"existing instance", "w", []*store.Task{newTask("w", "c", "q1", now)}, store.ErrExists},
		{"task of another instance", "x1", []*store.Task{newTask("other", "a", "q1", now)}, store.ErrInvalidArgument},
		{"invalid task", "x2", []*store.Task{{StepID: "a", Queue: "q1", MaxAttempts: 0}}, store.ErrInvalidArgument},
		{"nil task", "x3", []*store.Task{nil}, store.ErrInvalidArgument},
		{"two tasks for one step", "x4", []*store.Task{newTask("", "a", "q1", now), newTask("", "a", "q1", now)}, store.ErrExists},
		{"taken task id", "x5", []*store.Task{withID("t-a", newTask("", "a", "q1", now))}, store.ErrExists},
	} {
		before := b.countAll(t)
		_, err := b.s.Create(b.ctx, store.CreateParams{ID: tc.id, Status: workflow.StatusRunning, Tasks: tc.tasks})
		wantErrorIs(t, "Create with "+tc.name, err, tc.want)
		if tc.name == "taken task id" && err != nil && !strings.Contains(err.Error(), "task") {
			t.Errorf("Create with a taken task id: %q does not say that a task exists", err)
		}
		if n := b.countAll(t); n != before {
			t.Errorf("Create with %s: %d instances, want %d", tc.name, n, before)
		}
		if tasks := b.tasksOf(t, eq, "w"); len(tasks) != 2 {
			t.Errorf("Create with %s: w has %d tasks, want 2", tc.name, len(tasks))
		}
		if tc.id != "w" {
			if tasks := b.tasksOf(t, eq, tc.id); len(tasks) != 0 {
				t.Errorf("Create with %s: %d tasks stored for %s", tc.name, len(tasks), tc.id)
			}
		}
	}
}

// Under LatestRevision an instance is created only while its revision is the
// definition's latest: with or without tasks, nothing is written otherwise.
func testCreateLatestRevision(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	d := b.defs(t)
	b.putDefinition(t, d, "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	create := func(id string, rev int, latest, withTasks bool) error {
		p := store.CreateParams{ID: id, Definition: "d", DefinitionRevision: rev, LatestRevision: latest, Status: workflow.StatusRunning}
		if withTasks {
			p.Tasks, p.Notify = []*store.Task{newTask("", "a", "q1", now)}, true
		}
		_, err := b.s.Create(b.ctx, p)
		return err
	}
	for _, withTasks := range []bool{false, true} {
		if err := create(fmt.Sprintf("r1-%v", withTasks), 1, true, withTasks); err != nil {
			t.Errorf("Create at the latest revision (tasks %v): %v", withTasks, err)
		}
	}
	b.putDefinition(t, d, "d", `{"v":2}`, 2, true)
	for _, withTasks := range []bool{false, true} {
		id := fmt.Sprintf("stale-%v", withTasks)
		before := b.countAll(t)
		err := create(id, 1, true, withTasks)
		wantErrorIs(t, fmt.Sprintf("Create at an older revision (tasks %v)", withTasks), err, store.ErrConflict)
		wantErrorIs(t, fmt.Sprintf("Create at an older revision (tasks %v)", withTasks), err, store.ErrStaleRevision)
		if err != nil && !strings.Contains(err.Error(), "newer than 1") {
			t.Errorf("Create at an older revision: %q does not say that a newer revision exists", err)
		}
		if n := b.countAll(t); n != before {
			t.Errorf("Create at an older revision: %d instances, want %d", n, before)
		}
		if tasks := b.tasksOf(t, eq, id); len(tasks) != 0 {
			t.Errorf("Create at an older revision: %d tasks stored", len(tasks))
		}
		if err := create(id, 1, false, withTasks); err != nil {
			t.Errorf("Create at an older revision without LatestRevision (tasks %v): %v", withTasks, err)
		}
		if err := create(fmt.Sprintf("r2-%v", withTasks), 2, true, withTasks); err != nil {
			t.Errorf("Create at the new latest revision (tasks %v): %v", withTasks, err)
		}
	}
	wantErrorIs(t, "Create of a taken id at the latest revision", create("r2-false", 2, true, false), store.ErrExists)
	_, err := b.s.Create(b.ctx, store.CreateParams{ID: "free", LatestRevision: true})
	wantErrorIs(t, "Create of a free-form instance with LatestRevision", err, store.ErrInvalidArgument)
}

func testCommitStepsOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	if vs, err := eq.CommitSteps(b.ctx, nil); err != nil || len(vs) != 0 {
		t.Errorf("CommitSteps(nil) = %v, %v; want [], nil", vs, err)
	}
	now := b.clock.Now()
	var cs []store.StepCommit
	var nexts []*store.Task
	for _, id := range []string{"w1", "w2", "w3"} {
		_, tk := b.commitFixture(t, eq, id)
		c, next := completion(b.get(t, id), tk, now)
		cs = append(cs, c)
		nexts = append(nexts, next)
	}
	// Two commits of one instance, in the order they apply: the second
	// starts from the version the first writes.
	two := b.create(t, store.CreateParams{ID: "two", Status: workflow.StatusRunning, State: workflow.State{Steps: map[string]*workflow.StepState{
		"x": {Status: workflow.StepRunning}, "y": {Status: workflow.StepRunning}}},
		Tasks: []*store.Task{withID("two-x", newTask("two", "x", "q1", now)), withID("two-y", newTask("two", "y", "q1", now))}})
	tx, ty := b.lease(t, eq, "two-x", now.Add(time.Hour)), b.lease(t, eq, "two-y", now.Add(time.Hour))
	for i, tk := range []*store.Task{tx, ty} {
		state := workflow.State{Steps: map[string]*workflow.StepState{"x": {Status: workflow.StepRunning}, "y": {Status: workflow.StepRunning}}}
		state.Steps["x"].Status = workflow.StepCompleted
		if i == 1 {
			state.Steps["y"].Status = workflow.StepCompleted
		}
		done := *tk
		done.Status, done.Lease, done.LeaseOwner, done.LeaseUntil = store.TaskDone, "", "", time.Time{}
		cs = append(cs, store.StepCommit{Task: &done, Lease: tk.Lease, Now: now, ExpectedVersion: two.Version + int64(i),
			From: workflow.StatusRunning, Status: workflow.StatusRunning, State: state, Cause: "done " + tk.StepID})
	}
	versions, err := eq.CommitSteps(b.ctx, cs)
	if err != nil {
		t.Fatalf("CommitSteps: %v", err)
	}
	if want := []int64{1, 1, 1, 1, 2}; fmt.Sprint(versions) != fmt.Sprint(want) {
		t.Errorf("CommitSteps versions = %v, want %v", versions, want)
	}
	for i, id := range []string{"w1", "w2", "w3"} {
		got := b.get(t, id)
		assertState(t, "state of "+id, cs[i].State, got.State)
		assertTask(t, "new task of "+id, stored(nexts[i], now), b.lockTask(t, eq, nexts[i].ID))
		assertTask(t, "the caller's new task of "+id, stored(nexts[i], now), nexts[i])
		if task := b.lockTask(t, eq, id+"-a"); task.Status != store.TaskDone || cs[i].Task.Status != store.TaskDone {
			t.Errorf("%s: task %s, the caller's %s; want DONE", id, task.Status, cs[i].Task.Status)
		}
	}
	if got := b.get(t, "two"); got.Version != 2 || got.State.Steps["x"].Status != workflow.StepCompleted || got.State.Steps["y"].Status != workflow.StepCompleted {
		t.Errorf("two after both commits: version %d, steps %+v %+v", got.Version, got.State.Steps["x"], got.State.Steps["y"])
	}
}

// Any commit that cannot be written — a stale lease, an instance that moved
// on, a taken task, an invalid value — leaves every commit of the call
// unwritten, wherever it stands in the list.
func testCommitStepsAllOrNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	now := b.clock.Now()
	ids := []string{"w1", "w2", "w3"}
	var snaps []snapshot
	var tasks []*store.Task
	for _, id := range ids {
		_, tk := b.commitFixture(t, eq, id)
		if id == "w3" {
			b.insertTasks(t, withID("taken", newTask("w3", "c", "q1", now)))
		}
		snaps = append(snaps, b.snapshot(t, id))
		tasks = append(tasks, tk)
	}
	for _, tc := range []struct {
		name   string
		at     int
		change func(c *store.StepCommit)
		want   error
	}{
		{"stale lease first", 0, func(c *store.StepCommit) { c.Lease = "stale" }, store.ErrConflict},
		{"stale lease last", 2, func(c *store.StepCommit) { c.Lease = "stale" }, store.ErrConflict},
		{"version moved on in the middle", 1, func(c *store.StepCommit) { c.ExpectedVersion-- }, store.ErrConflict},
		{"taken step last", 2, func(c *store.StepCommit) { c.Insert[0].StepID = "c" }, store.ErrExists},
		{"invalid state in the middle", 1, func(c *store.StepCommit) { c.State.Steps["a"].Status = "BOGUS" }, workflow.ErrInvalidState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cs []store.StepCommit
			for i, id := range ids {
				c, _ := completion(b.get(t, id), tasks[i], now)
				cs = append(cs, c)
			}
			tc.change(&cs[tc.at])
			_, err := eq.CommitSteps(b.ctx, cs)
			wantErrorIs(t, "CommitSteps with "+tc.name, err, tc.want)
			for i, id := range ids {
				b.unchanged(t, id+" after CommitSteps with "+tc.name, snaps[i])
				assertTask(t, id+"'s task after CommitSteps with "+tc.name, tasks[i], b.lockTask(t, eq, tasks[i].ID))
				if _, err := eq.Task(b.ctx, id+"-b"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s's new task after CommitSteps with %s: Task = %v, want ErrNotFound", id, tc.name, err)
				}
			}
		})
	}
}

// groupStart is a start as the engine writes it: a RUNNING instance of
// definition d at revision 1 with its first task.
func groupStart(id string, now time.Time) (store.CreateParams, *store.Task) {
	first := newTask("", "a", "q1", now)
	return store.CreateParams{ID: id, Definition: "d", DefinitionRevision: 1, LatestRevision: true, Status: workflow.StatusRunning,
		State: stepState(), Cause: "start", Tasks: []*store.Task{first}, Notify: true}, first
}

// New instances and completions written together.
func testCommitGroupOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	if insts, vs, err := eq.CommitGroup(b.ctx, nil, nil, nil); err != nil || len(insts) != 0 || len(vs) != 0 {
		t.Errorf("CommitGroup(nil, nil) = %v, %v, %v; want nothing", insts, vs, err)
	}
	now := b.clock.Now()
	inst, tk := b.commitFixture(t, eq, "w1")
	c, next := completion(b.get(t, inst.ID), tk, now)
	p1, first1 := groupStart("s1", now)
	p2, first2 := groupStart("s2", now)
	insts, vs, err := eq.CommitGroup(b.ctx, []store.CreateParams{p1, p2}, []store.StepCommit{c}, nil)
	if err != nil {
		t.Fatalf("CommitGroup: %v", err)
	}
	if len(insts) != 2 || len(vs) != 1 || vs[0] != inst.Version+1 {
		t.Fatalf("CommitGroup = %d instances, versions %v; want 2 and [%d]", len(insts), vs, inst.Version+1)
	}
	for i, id := range []string{"s1", "s2"} {
		assertInstance(t, "created "+id, b.get(t, id), insts[i])
		if h := b.history(t, id); len(h) != 1 || h[0].Cause != "start" {
			t.Errorf("%s: history %+v, want the start", id, h)
		}
	}
	for _, first := range []*store.Task{first1, first2} {
		if first.ID == "" {
			t.Fatalf("a created instance's task was not filled in: %+v", first)
		}
		assertTask(t, "first task of "+first.InstanceID, stored(first, now), b.lockTask(t, eq, first.ID))
	}
	assertTask(t, "the completion's new task", stored(next, now), b.lockTask(t, eq, next.ID))
	if got := b.get(t, "w1"); got.Version != vs[0] {
		t.Errorf("w1: version %d, want %d", got.Version, vs[0])
	}
	// Creates alone.
	p3, _ := groupStart("s3", now)
	if insts, _, err := eq.CommitGroup(b.ctx, []store.CreateParams{p3}, nil, nil); err != nil || len(insts) != 1 {
		t.Errorf("CommitGroup of one create = %v, %v", insts, err)
	}
}

// errTakenID marks the cases of a create whose id is taken.
var errTakenID = errors.New("id taken")

// Any create that would not happen — id taken, stale revision, invalid — or
// any failing commit writes nothing of the group.
func testCommitGroupAllOrNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	d := b.defs(t)
	b.putDefinition(t, d, "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	inst, tk := b.commitFixture(t, eq, "w1")
	snap := b.snapshot(t, "w1")
	b.create(t, store.CreateParams{ID: "taken"})
	for _, tc := range []struct {
		name   string
		change func(creates []store.CreateParams, c *store.StepCommit)
		want   error
	}{
		// A taken id fails the group as ErrExists or as ErrConflict (on
		// PostgreSQL a statement that created nothing cannot say why).
		{"taken id last", func(cr []store.CreateParams, _ *store.StepCommit) { cr[1].ID = "taken" }, errTakenID},
		{"two creates of one id", func(cr []store.CreateParams, _ *store.StepCommit) { cr[1].ID = cr[0].ID }, errTakenID},
		{"stale lease of the commit", func(_ []store.CreateParams, c *store.StepCommit) { c.Lease = "stale" }, store.ErrConflict},
		{"invalid create first", func(cr []store.CreateParams, _ *store.StepCommit) { cr[0].Status = "BOGUS" }, store.ErrInvalidArgument},
		{"revision 2 exists", func(_ []store.CreateParams, _ *store.StepCommit) {
			b.putDefinition(t, d, "d", `{"v":2}`, 2, true)
		}, store.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.countAll(t)
			p1, _ := groupStart("g1", now)
			p2, _ := groupStart("g2", now)
			creates := []store.CreateParams{p1, p2}
			c, next := completion(b.get(t, inst.ID), tk, now)
			tc.change(creates, &c)
			_, _, err := eq.CommitGroup(b.ctx, creates, []store.StepCommit{c}, nil)
			if tc.want == errTakenID {
				if !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrConflict) {
					t.Errorf("CommitGroup with %s: error = %v, want ErrExists or ErrConflict", tc.name, err)
				}
			} else {
				wantErrorIs(t, "CommitGroup with "+tc.name, err, tc.want)
			}
			if n := b.countAll(t); n != before {
				t.Errorf("CommitGroup with %s: %d instances, want %d", tc.name, n, before)
			}
			for _, id := range []string{"g1", "g2"} {
				if tasks := b.tasksOf(t, eq, id); len(tasks) != 0 {
					t.Errorf("CommitGroup with %s: %d tasks of %s", tc.name, len(tasks), id)
				}
			}
			b.unchanged(t, "w1 after CommitGroup with "+tc.name, snap)
			assertTask(t, "w1's task after CommitGroup with "+tc.name, tk, b.lockTask(t, eq, tk.ID))
			if _, err := eq.Task(b.ctx, next.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the completion's new task after CommitGroup with %s: Task = %v, want ErrNotFound", tc.name, err)
			}
		})
	}
}
