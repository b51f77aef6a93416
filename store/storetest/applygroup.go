package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyGroup: new instances and guarded writes as one atomic write, all of
// it or nothing.

var applyGroupTests = []conformanceTest{
	{"ApplyGroup_ok", testApplyGroupOK},
	{"ApplyGroup_allOrNothing", testApplyGroupAllOrNothing},
	{"Apply_leaseHolderConflicts", testApplyLeaseHolderConflicts},
}

// leasedFixture creates a RUNNING instance id with stepState (step a
// RUNNING) and a task for a, leased until an hour from now; it returns the
// instance and the leased task.
func (b *bundle) leasedFixture(t testing.TB, eq store.TaskQuerier, id string) (*workflow.Instance, *store.Task) {
	t.Helper()
	inst := b.runningWith(t, id, withID(id+"-a", newTask(id, "a", "q1", clockStart)))
	tk := b.lease(t, eq, id+"-a", b.clock.Now().Add(time.Hour))
	return inst, tk
}

// completion returns the write a worker makes when step a of inst
// completes and schedules step b: its task DONE (guarded by its lease), a
// COMPLETED, b RUNNING with a new task.
func completion(inst *workflow.Instance, tk *store.Task, now time.Time) (*store.Write, *store.Task) {
	state := inst.State.Clone()
	state.Steps["a"].Status = workflow.StepCompleted
	state.Steps["a"].Output = json.RawMessage(`{"done":9007199254740993}`)
	state.Steps["a"].Error = ""
	state.Steps["b"].Status = workflow.StepRunning
	done := *tk
	done.Status, done.LastError = store.TaskDone, ""
	done.Lease, done.LeaseOwner, done.LeaseUntil, done.AttemptDeadline = "", "", time.Time{}, time.Time{}
	next := withID(inst.ID+"-b", newTask(inst.ID, "b", "q1", now))
	return &store.Write{
		ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status, State: state,
		Deadline: inst.Deadline, Cause: "step a completed", Insert: []*store.Task{next},
		Update: []store.TaskWrite{{Task: &done, Guard: store.GuardOf(tk)}},
		Now:    now, Notify: true,
	}, next
}

// groupStart is a start as the engine writes it: a RUNNING instance of
// definition d at revision 1 with its first task.
func groupStart(id string, now time.Time) (store.CreateParams, *store.Task) {
	first := newTask("", "a", "q1", now)
	return store.CreateParams{ID: id, Definition: "d", DefinitionRevision: 1, LatestRevision: true, Status: workflow.StatusRunning,
		State: stepState(), Cause: "start", Tasks: []*store.Task{first}, Notify: true}, first
}

// New instances and writes written together: the created instances and the
// written ones are returned as stored, and the callers' tasks filled in.
// Two writes of one instance, in the order they apply: the second starts
// from the version the first writes.
func testApplyGroupOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	if created, written, err := eq.ApplyGroup(b.ctx, nil, nil, nil); err != nil || len(created) != 0 || len(written) != 0 {
		t.Errorf("ApplyGroup(nil, nil, nil) = %v, %v, %v; want nothing", created, written, err)
	}
	now := b.clock.Advance(time.Second)
	var writes []*store.Write
	var nexts, dones []*store.Task
	for _, id := range []string{"w1", "w2"} {
		_, tk := b.leasedFixture(t, eq, id)
		w, next := completion(b.get(t, id), tk, now)
		writes = append(writes, w)
		nexts = append(nexts, next)
		dones = append(dones, w.Update[0].Task)
	}
	two := b.create(t, store.CreateParams{ID: "two", Status: workflow.StatusRunning, State: workflow.State{Steps: map[string]*workflow.StepState{
		"x": {Status: workflow.StepRunning}, "y": {Status: workflow.StepRunning}}},
		Tasks: []*store.Task{withID("two-x", newTask("two", "x", "q1", now)), withID("two-y", newTask("two", "y", "q1", now))}})
	for i, id := range []string{"two-x", "two-y"} {
		tk := b.lease(t, eq, id, now.Add(time.Hour))
		state := workflow.State{Steps: map[string]*workflow.StepState{"x": {Status: workflow.StepCompleted}, "y": {Status: workflow.StepRunning}}}
		if i == 1 {
			state.Steps["y"].Status = workflow.StepCompleted
		}
		done := *tk
		done.Status, done.Lease, done.LeaseOwner, done.LeaseUntil = store.TaskDone, "", "", time.Time{}
		writes = append(writes, &store.Write{ID: "two", ExpectedVersion: two.Version + int64(i), From: workflow.StatusRunning,
			Status: workflow.StatusRunning, State: state, Cause: "done " + tk.StepID, Now: now,
			Update: []store.TaskWrite{{Task: &done, Guard: store.GuardOf(tk)}}})
	}
	p1, first1 := groupStart("s1", now)
	p2, first2 := groupStart("s2", now)
	wantStates := make([]workflow.State, len(writes))
	for i, w := range writes {
		wantStates[i] = w.State.Clone()
	}
	created, written, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p1, p2}, writes, nil)
	if err != nil {
		t.Fatalf("ApplyGroup: %v", err)
	}
	if len(created) != 2 || len(written) != len(writes) {
		t.Fatalf("ApplyGroup = %d created, %d written; want 2 and %d", len(created), len(written), len(writes))
	}
	for i, id := range []string{"s1", "s2"} {
		assertInstance(t, "created "+id, b.get(t, id), created[i])
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
	for i, id := range []string{"w1", "w2"} {
		got := b.get(t, id)
		assertInstance(t, "written "+id, got, written[i])
		if got.Version != 1 || got.UpdatedAt != store.Timestamp(now) {
			t.Errorf("%s: version %d, updated %v; want 1, %v", id, got.Version, got.UpdatedAt, store.Timestamp(now))
		}
		assertState(t, "state of "+id, wantStates[i], got.State)
		if h := b.history(t, id); h[len(h)-1].Version != 1 || h[len(h)-1].Cause != "step a completed" {
			t.Errorf("%s: last history row %+v, want version 1, the completion", id, h[len(h)-1])
		}
		assertTask(t, "new task of "+id, stored(nexts[i], now), b.lockTask(t, eq, nexts[i].ID))
		assertTask(t, "the caller's new task of "+id, stored(nexts[i], now), nexts[i])
		wantDone := *dones[i]
		wantDone.UpdatedAt = store.Timestamp(now)
		assertTask(t, "completed task of "+id, &wantDone, b.lockTask(t, eq, id+"-a"))
		assertTask(t, "the caller's completed task of "+id, &wantDone, dones[i])
	}
	got := b.get(t, "two")
	if got.Version != 2 || written[2].Version != 1 || written[3].Version != 2 {
		t.Errorf("two after both writes: version %d, written at %d and %d; want 2, 1, 2", got.Version, written[2].Version, written[3].Version)
	}
	assertInstance(t, "the last write of two", got, written[3])
	if h := b.history(t, "two"); len(h) != 3 || h[1].Cause != "done x" || h[2].Cause != "done y" {
		t.Errorf("two: history %+v, want start, done x, done y", h)
	}
	// Creates alone, and writes alone.
	p3, _ := groupStart("s3", now)
	if created, written, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p3}, nil, nil); err != nil || len(created) != 1 || len(written) != 0 {
		t.Errorf("ApplyGroup of one create = %v, %v, %v", created, written, err)
	}
	_, tk := b.leasedFixture(t, eq, "w3")
	w, _ := completion(b.get(t, "w3"), tk, now)
	if created, written, err := eq.ApplyGroup(b.ctx, nil, []*store.Write{w}, nil); err != nil || len(created) != 0 || len(written) != 1 || written[0].Version != 1 {
		t.Errorf("ApplyGroup of one write = %v, %v, %v", created, written, err)
	}
}

// Any create that would not happen — id taken, stale revision, invalid —
// or any write that misses or fails writes nothing of the group, wherever
// it stands, and fills in none of the callers' tasks; a miss says what
// moved, as Apply's own.
func testApplyGroupAllOrNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	d := b.defs(t)
	b.putDefinition(t, d, "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	ids := []string{"w1", "w2", "w3"}
	var snaps []snapshot
	var tasks []*store.Task
	for _, id := range ids {
		_, tk := b.leasedFixture(t, eq, id)
		snaps = append(snaps, b.snapshot(t, id))
		tasks = append(tasks, tk)
	}
	// A task of w3 whose step a new task takes; w3 as it is after that.
	b.insertTasks(t, withID("taken", newTask("w3", "c", "q1", now)))
	snaps[len(snaps)-1] = b.snapshot(t, "w3")
	taken := b.lockTask(t, eq, "taken")
	b.create(t, store.CreateParams{ID: "taken"})
	taskMiss := func(task string) func(t *testing.T, err error) {
		return func(t *testing.T, err error) {
			var tc *store.TaskConflictError
			if !errors.As(err, &tc) || tc.TaskID != task {
				t.Errorf("error = %v (%T), want a *store.TaskConflictError naming task %s", err, err, task)
			}
			wantErrorIs(t, "task guard miss", err, store.ErrConflict)
		}
	}
	is := func(target error) func(t *testing.T, err error) {
		return func(t *testing.T, err error) { wantErrorIs(t, "ApplyGroup", err, target) }
	}
	// A taken id fails the group as ErrExists or as ErrConflict (on
	// PostgreSQL a statement that created nothing cannot say why).
	takenID := func(t *testing.T, err error) {
		if !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrConflict) {
			t.Errorf("error = %v, want ErrExists or ErrConflict", err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(creates []store.CreateParams, ws []*store.Write)
		check  func(t *testing.T, err error)
	}{
		{"stale lease first", func(_ []store.CreateParams, ws []*store.Write) { ws[0].Update[0].Guard.Lease = "stale" }, taskMiss("w1-a")},
		{"stale lease last", func(_ []store.CreateParams, ws []*store.Write) { ws[2].Update[0].Guard.Lease = "stale" }, taskMiss("w3-a")},
		{"lease extended since read", func(_ []store.CreateParams, ws []*store.Write) {
			g := &ws[1].Update[0].Guard
			g.LeaseUntil = g.LeaseUntil.Add(time.Minute)
		}, taskMiss("w2-a")},
		{"status guard missed", func(_ []store.CreateParams, ws []*store.Write) {
			cancelled := *taken
			cancelled.Status = store.TaskCancelled
			g := store.GuardOf(taken)
			g.Status = store.TaskDone
			ws[2].Update = append(ws[2].Update, store.TaskWrite{Task: &cancelled, Guard: g})
		}, taskMiss("taken")},
		{"version moved on in the middle", func(_ []store.CreateParams, ws []*store.Write) { ws[1].ExpectedVersion++ }, func(t *testing.T, err error) {
			wantConflict(t, "a stale version", err, "w2", snaps[1].inst.Version+1, snaps[1].inst.Version)
		}},
		{"writes of one instance out of order", func(_ []store.CreateParams, ws []*store.Write) {
			second := *ws[0]
			second.ExpectedVersion++
			second.Insert, second.Update, second.Cause = nil, nil, "second"
			ws[0], ws[1] = &second, ws[0]
		}, func(t *testing.T, err error) {
			wantConflict(t, "the later write first", err, "w1", snaps[0].inst.Version+1, snaps[0].inst.Version)
		}},
		{"unknown instance", func(_ []store.CreateParams, ws []*store.Write) {
			ws[1].ID, ws[1].Insert, ws[1].Update = "nobody", nil, nil
		}, is(store.ErrNotFound)},
		{"taken step last", func(_ []store.CreateParams, ws []*store.Write) { ws[2].Insert[0].StepID = "c" }, is(store.ErrExists)},
		{"invalid state in the middle", func(_ []store.CreateParams, ws []*store.Write) {
			ws[1].State.Steps["a"].Status = "BOGUS"
		}, is(workflow.ErrInvalidState)},
		{"nil write", func(_ []store.CreateParams, ws []*store.Write) { ws[1] = nil }, is(store.ErrInvalidArgument)},
		{"taken id last", func(cr []store.CreateParams, _ []*store.Write) { cr[1].ID = "taken" }, takenID},
		{"two creates of one id", func(cr []store.CreateParams, _ []*store.Write) { cr[1].ID = cr[0].ID }, takenID},
		{"invalid create first", func(cr []store.CreateParams, _ []*store.Write) { cr[0].Status = "BOGUS" }, is(store.ErrInvalidArgument)},
		{"revision 2 exists", func(_ []store.CreateParams, _ []*store.Write) {
			b.putDefinition(t, d, "d", `{"v":2}`, 2, true)
		}, is(store.ErrConflict)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.countAll(t)
			p1, first1 := groupStart("g1", now)
			p2, _ := groupStart("g2", now)
			creates := []store.CreateParams{p1, p2}
			var ws []*store.Write
			var nexts []*store.Task
			for i, id := range ids {
				w, next := completion(b.get(t, id), tasks[i], now)
				ws, nexts = append(ws, w), append(nexts, next)
			}
			callers := make([]store.Task, len(ids))
			for i, w := range ws {
				callers[i] = *w.Update[0].Task
			}
			tc.change(creates, ws)
			created, written, err := eq.ApplyGroup(b.ctx, creates, ws, nil)
			tc.check(t, err)
			if created != nil || written != nil {
				t.Errorf("a failed group returned %v and %v", created, written)
			}
			if n := b.countAll(t); n != before {
				t.Errorf("%d instances, want %d", n, before)
			}
			for _, id := range []string{"g1", "g2"} {
				if tasks := b.tasksOf(t, eq, id); len(tasks) != 0 {
					t.Errorf("%d tasks of %s", len(tasks), id)
				}
			}
			if first1.ID != "" {
				t.Errorf("a create's task was filled in: %+v", first1)
			}
			for i, id := range ids {
				b.unchanged(t, id, snaps[i])
				assertTask(t, id+"'s task", tasks[i], b.lockTask(t, eq, tasks[i].ID))
				if _, err := eq.Task(b.ctx, nexts[i].ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s's new task: Task = %v, want ErrNotFound", id, err)
				}
				if !nexts[i].CreatedAt.IsZero() {
					t.Errorf("%s's new task was filled in: %+v", id, nexts[i])
				}
			}
			for i, w := range ws {
				if w != nil && w.ID == ids[i] && len(w.Update) > 0 && w.Update[0].Task.UpdatedAt != callers[i].UpdatedAt {
					t.Errorf("%s's completed task was filled in: %+v", ids[i], w.Update[0].Task)
				}
			}
			assertTask(t, "the task a status guard protects", taken, b.lockTask(t, eq, "taken"))
		})
	}
}

// A lease holder's write conflicts, and changes nothing, when another
// writer moved the task or the instance after it was read.
func testApplyLeaseHolderConflicts(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, inst *workflow.Instance, tk *store.Task)
	}{
		{"lease ends at now", func(t *testing.T, _ *workflow.Instance, tk *store.Task) {
			tk.LeaseUntil = b.clock.Now()
			b.updateTask(t, tk)
		}},
		{"task released", func(t *testing.T, _ *workflow.Instance, tk *store.Task) {
			b.setTaskStatus(t, eq, tk.ID, store.TaskQueued)
		}},
		{"instance moved on", func(t *testing.T, inst *workflow.Instance, _ *store.Task) {
			if _, err := Replace(b.ctx, b.s, inst.ID, inst.Version, inst.State, "someone else"); err != nil {
				t.Fatal(err)
			}
		}},
		{"instance paused", func(t *testing.T, inst *workflow.Instance, _ *store.Task) {
			b.transition(t, inst.ID, workflow.StatusRunning, workflow.StatusPaused)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("c%d", b.countAll(t))
			_, tk := b.leasedFixture(t, eq, id)
			inst := b.get(t, id)
			w, next := completion(inst, tk, b.clock.Now())
			tc.before(t, inst, b.lockTask(t, eq, tk.ID))
			snap := b.snapshot(t, id)
			task := b.lockTask(t, eq, tk.ID)
			caller := *w.Update[0].Task
			_, err := b.s.Apply(b.ctx, w)
			wantErrorIs(t, "Apply", err, store.ErrConflict)
			b.unchanged(t, "after a conflicting Apply", snap)
			assertTask(t, "task after a conflicting Apply", task, b.lockTask(t, eq, tk.ID))
			assertTask(t, "the caller's task after a conflicting Apply", &caller, w.Update[0].Task)
			if _, err := eq.Task(b.ctx, next.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the new task of a conflicting Apply: Task = %v, want ErrNotFound", err)
			}
		})
	}
}
