package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Conformance of store.TaskQuerier.ClaimTasks: the claim the engine's
// workers make, as one transaction with the instances read alongside.

var claimTaskTests = []conformanceTest{
	{"ClaimTasks_ok", testClaimTasksOK},
	{"ClaimTasks_instanceMovedOn", testClaimTasksMovedOn},
	{"ClaimTasks_twoWritesOfOneInstance", testClaimTasksTwoWrites},
	{"ClaimTasks_invalid", testClaimTasksInvalid},
	{"ClaimTasks_concurrent", testClaimTasksConcurrent},
}

// claimLease leases tk as the engine does, to owner.
func claimLease(tk *store.Task, owner string, until, deadline time.Time) *store.Task {
	tk.Status = store.TaskLeased
	tk.Attempt++
	tk.Lease = "lease-" + owner + "-" + tk.ID
	tk.LeaseOwner = owner
	tk.LeaseUntil = until
	tk.AttemptDeadline = deadline
	return tk
}

// claimedState is the instance's state with the variable "claims" counted up.
func claimedState(t testing.TB, inst *workflow.Instance) workflow.State {
	t.Helper()
	st := inst.State.Clone()
	n := 0
	if raw, ok := st.Variables["claims"]; ok {
		var err error
		if n, err = strconv.Atoi(string(raw)); err != nil {
			t.Fatalf("claims = %s: %v", raw, err)
		}
	}
	if err := st.SetVar("claims", n+1); err != nil {
		t.Fatal(err)
	}
	return st
}

func testClaimTasksOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	all := b.newClaimFixture(t, eq)
	b.clock.Set(clockStart.Add(time.Hour)) // the store's clock stamps the writes
	run, paused := b.snapshot(t, "run"), b.snapshot(t, "paused")
	until, deadline := clockStart.Add(time.Minute), clockStart.Add(30*time.Second)
	var writes []*store.ClaimWrite
	err := eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1", "q3", store.QueueHTTP, store.QueueSleep}, Now: clockStart, Limit: 100},
		func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
			var tasks []*store.Task
			for _, c := range locked {
				tasks = append(tasks, c.Task)
				if c.Instance == nil || c.Instance.ID != c.Task.InstanceID {
					t.Errorf("task %s came with instance %v, want its instance %s", c.Task.ID, c.Instance, c.Task.InstanceID)
					continue
				}
				if diff := cmp.Diff(viewOf(b.get(t, c.Instance.ID)), viewOf(c.Instance)); diff != "" {
					t.Errorf("task %s: its instance as read (-stored +read):\n%s", c.Task.ID, diff)
				}
			}
			// In run_at order, as a claim locks them.
			assertTasks(t, "ClaimTasks locked", pick(all, "q3", "sleep-run", "p-sleep", "c1", "c2", "c3a", "c3b", "c4"), tasks)
			byID := map[string]store.Claimable{}
			for _, c := range locked {
				byID[c.Task.ID] = c
			}
			if len(byID) != 8 {
				return nil, fmt.Errorf("locked %d tasks", len(byID))
			}
			inst := byID["c1"].Instance
			writes = []*store.ClaimWrite{
				{Tasks: []*store.Task{claimLease(byID["c1"].Task, "node", until, deadline), claimLease(byID["c3a"].Task, "node", until, time.Time{})},
					SetState: true, ExpectedVersion: inst.Version, State: claimedState(t, inst), Cause: "deliver c1, c3a"},
				{Tasks: []*store.Task{claimLease(byID["p-sleep"].Task, "node", until, time.Time{})}},
			}
			return writes, nil
		})
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	for i, w := range writes {
		if !w.Written {
			t.Errorf("write %d: Written = false, want true", i+1)
		}
	}
	// The instance: one version, its history row, as the write returned it.
	got := b.get(t, "run")
	if got.Version != run.inst.Version+1 || string(got.State.Variables["claims"]) != "1" {
		t.Errorf("instance after the claim: version %d, claims %s; want %d, 1", got.Version, got.State.Variables["claims"], run.inst.Version+1)
	}
	if !got.UpdatedAt.Equal(store.Timestamp(clockStart.Add(time.Hour))) {
		t.Errorf("updated_at = %v, want the store's clock %v", got.UpdatedAt, store.Timestamp(clockStart.Add(time.Hour)))
	}
	if diff := cmp.Diff(viewOf(got), viewOf(writes[0].Instance)); diff != "" {
		t.Errorf("the write's Instance (-stored +returned):\n%s", diff)
	}
	if writes[1].Instance != nil {
		t.Errorf("a write without SetState returned instance %+v", writes[1].Instance)
	}
	hist := b.history(t, "run")
	if last := hist[len(hist)-1]; len(hist) != len(run.history)+1 || last.Version != got.Version || last.Cause != "deliver c1, c3a" {
		t.Errorf("history: %d rows, last %+v; want %d rows, the last at version %d", len(hist), last, len(run.history)+1, got.Version)
	}
	b.unchanged(t, "the paused instance, whose timer was leased", paused)
	// The leased tasks as stored; the others as they were.
	for _, w := range writes {
		for _, tk := range w.Tasks {
			assertTask(t, "leased task "+tk.ID, tk, b.lockTask(t, eq, tk.ID))
		}
	}
	if tk := b.lockTask(t, eq, "c1"); tk.Status != store.TaskLeased || tk.Attempt != 1 || tk.LeaseOwner != "node" ||
		!tk.LeaseUntil.Equal(store.Timestamp(until)) || !tk.AttemptDeadline.Equal(store.Timestamp(deadline)) {
		t.Errorf("c1 after the claim: %+v", tk)
	}
	for _, id := range []string{"q3", "sleep-run", "c2", "c3b", "c4", "late"} {
		assertTask(t, "task "+id+", locked but not written", all[id], b.lockTask(t, eq, id))
	}
	// The claim's locks ended with it: the rest can be claimed.
	var again []string
	err = eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: 10}, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		for _, c := range locked {
			again = append(again, c.Task.ID)
		}
		return nil, nil
	})
	if err != nil || !slices.Equal(again, []string{"c3b", "c4"}) {
		t.Errorf("a second claim locked %v, %v; want [c3b c4]", again, err)
	}
}

// testClaimTasksMovedOn: a write whose instance is no longer at the version
// read is skipped, its tasks stay queued; the claim's other writes are made.
func testClaimTasksMovedOn(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.runningWith(t, "a", withID("ta", newTask("a", "a", "q1", clockStart.Add(-time.Second))))
	b.runningWith(t, "b", withID("tb", newTask("b", "a", "q1", clockStart)))
	before := b.readTasks(t, eq, "a", "b")
	snapA, snapB := b.snapshot(t, "a"), b.snapshot(t, "b")
	var writes []*store.ClaimWrite
	err := eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: 10}, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		for _, c := range locked {
			v := c.Instance.Version
			if c.Instance.ID == "a" {
				v++ // as if it had moved on since it was read
			}
			writes = append(writes, &store.ClaimWrite{Tasks: []*store.Task{claimLease(c.Task, "node", clockStart.Add(time.Minute), time.Time{})},
				SetState: true, ExpectedVersion: v, State: claimedState(t, c.Instance), Cause: "deliver"})
		}
		return writes, nil
	})
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	if len(writes) != 2 || writes[0].Written || writes[0].Instance != nil || !writes[1].Written {
		t.Fatalf("writes = %+v; want the first skipped, the second made", writes)
	}
	b.unchanged(t, "the instance that moved on", snapA)
	assertTask(t, "the task of the instance that moved on", before["ta"], b.lockTask(t, eq, "ta"))
	if got := b.get(t, "b"); got.Version != snapB.inst.Version+1 {
		t.Errorf("the other instance: version %d, want %d", got.Version, snapB.inst.Version+1)
	}
	if tk := b.lockTask(t, eq, "tb"); tk.Status != store.TaskLeased {
		t.Errorf("the other task: %s, want LEASED", tk.Status)
	}
	// A claim that writes nothing changes nothing.
	err = eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: 10}, func([]store.Claimable) ([]*store.ClaimWrite, error) { return nil, nil })
	if err != nil {
		t.Errorf("a claim that writes nothing: %v", err)
	}
	b.unchanged(t, "after a claim that writes nothing", snapA)
	assertTask(t, "after a claim that writes nothing", before["ta"], b.lockTask(t, eq, "ta"))
}

// testClaimTasksTwoWrites: two writes of one instance from the same version
// in one claim: the first is made, the second finds the instance moved on.
func testClaimTasksTwoWrites(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.runningWith(t, "a", withID("t1", newTask("a", "a", "q1", clockStart.Add(-time.Second))), withID("t2", newTask("a", "b", "q1", clockStart)))
	before := b.readTasks(t, eq, "a")
	var writes []*store.ClaimWrite
	err := eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: 10}, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		for _, c := range locked {
			writes = append(writes, &store.ClaimWrite{Tasks: []*store.Task{claimLease(c.Task, "node", clockStart.Add(time.Minute), time.Time{})},
				SetState: true, ExpectedVersion: c.Instance.Version, State: claimedState(t, c.Instance), Cause: "deliver " + c.Task.ID})
		}
		return writes, nil
	})
	if err != nil {
		t.Fatalf("ClaimTasks: %v", err)
	}
	if len(writes) != 2 || !writes[0].Written || writes[1].Written {
		t.Fatalf("writes = %+v; want the first made, the second skipped", writes)
	}
	got := b.get(t, "a")
	if got.Version != inst.Version+1 || string(got.State.Variables["claims"]) != "1" {
		t.Errorf("instance: version %d, claims %s; want %d, 1", got.Version, got.State.Variables["claims"], inst.Version+1)
	}
	if h := b.history(t, "a"); h[len(h)-1].Cause != "deliver t1" {
		t.Errorf("last history row %+v, want the first write's", h[len(h)-1])
	}
	if tk := b.lockTask(t, eq, "t1"); tk.Status != store.TaskLeased {
		t.Errorf("t1: %s, want LEASED", tk.Status)
	}
	assertTask(t, "the second write's task", before["t2"], b.lockTask(t, eq, "t2"))
}

// testClaimTasksInvalid: writes ClaimTasks refuses, a failing decide and bad
// arguments change nothing, and the tasks can be claimed afterwards.
func testClaimTasksInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.running(t, "a")
	b.running(t, "b")
	b.insertTasks(t,
		withID("ta1", newTask("a", "a", "q1", clockStart.Add(-3*time.Second))),
		withID("tb1", newTask("b", "a", "q1", clockStart.Add(-2*time.Second))),
		withID("ta2", newTask("a", "b", "q1", clockStart.Add(-time.Second))),
	)
	before := b.readTasks(t, eq, "a", "b")
	snapA, snapB := b.snapshot(t, "a"), b.snapshot(t, "b")
	until := clockStart.Add(time.Minute)
	badState := func(c store.Claimable) workflow.State {
		st := c.Instance.State.Clone()
		st.Steps["bad step"] = &workflow.StepState{Status: workflow.StepPending}
		return st
	}
	errDecide := errors.New("decide failed")
	for _, c := range []struct {
		name   string
		limit  int
		writes func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error)
		want   error
	}{
		{"a task not locked", 2, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			tk := *before["ta2"] // exists, but beyond the limit
			return []*store.ClaimWrite{{Tasks: []*store.Task{claimLease(&tk, "n", until, time.Time{})}}}, nil
		}, store.ErrInvalidArgument},
		{"a task twice", 3, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			tk := claimLease(byID["ta1"].Task, "n", until, time.Time{})
			return []*store.ClaimWrite{{Tasks: []*store.Task{tk}}, {Tasks: []*store.Task{tk}}}, nil
		}, store.ErrInvalidArgument},
		{"tasks of two instances", 3, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			return []*store.ClaimWrite{{Tasks: []*store.Task{claimLease(byID["ta1"].Task, "n", until, time.Time{}), claimLease(byID["tb1"].Task, "n", until, time.Time{})}}}, nil
		}, store.ErrInvalidArgument},
		{"a task not leased", 3, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			return []*store.ClaimWrite{{Tasks: []*store.Task{byID["ta1"].Task}}}, nil
		}, store.ErrInvalidArgument},
		{"a lease without an end", 3, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			return []*store.ClaimWrite{{Tasks: []*store.Task{claimLease(byID["ta1"].Task, "n", time.Time{}, time.Time{})}}}, nil
		}, store.ErrInvalidArgument},
		{"a write without tasks", 3, func(map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			return []*store.ClaimWrite{{SetState: true}}, nil
		}, store.ErrInvalidArgument},
		{"a nil write", 3, func(map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			return []*store.ClaimWrite{nil}, nil
		}, store.ErrInvalidArgument},
		{"an invalid state after a valid write", 3, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			a, b := byID["ta1"], byID["tb1"]
			return []*store.ClaimWrite{
				{Tasks: []*store.Task{claimLease(a.Task, "n", until, time.Time{})}, SetState: true, ExpectedVersion: a.Instance.Version, State: claimedState(t, a.Instance)},
				{Tasks: []*store.Task{claimLease(b.Task, "n", until, time.Time{})}, SetState: true, ExpectedVersion: b.Instance.Version, State: badState(b)},
			}, nil
		}, workflow.ErrInvalidState},
		{"decide fails", 3, func(byID map[string]store.Claimable) ([]*store.ClaimWrite, error) {
			claimLease(byID["ta1"].Task, "n", until, time.Time{})
			return nil, errDecide
		}, errDecide},
		{"limit 0", 0, nil, store.ErrInvalidArgument},
		{"nil decide", 3, nil, store.ErrInvalidArgument},
	} {
		var decide func([]store.Claimable) ([]*store.ClaimWrite, error)
		if c.writes != nil {
			decide = func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
				byID := map[string]store.Claimable{}
				for _, l := range locked {
					byID[l.Task.ID] = l
				}
				return c.writes(byID)
			}
		}
		err := eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: c.limit}, decide)
		wantErrorIs(t, "ClaimTasks, "+c.name, err, c.want)
		b.unchanged(t, c.name+": instance a", snapA)
		b.unchanged(t, c.name+": instance b", snapB)
		b.tasksUnchanged(t, eq, c.name, before)
	}
}

// testClaimTasksConcurrent: claimers racing over the tasks of a few
// instances each lease every task once, and no instance write is lost: an
// instance's "claims" counter equals the writes reported made for it and its
// version, its history is contiguous.
func testClaimTasksConcurrent(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	const instances, perInstance, claimers, limit = 6, 8, 8, 3
	v0 := map[string]int64{}
	for i := range instances {
		id := fmt.Sprintf("i%d", i)
		var tasks []*store.Task
		for j := range perInstance {
			tasks = append(tasks, withID(fmt.Sprintf("%s-t%d", id, j), newTask(id, fmt.Sprintf("s%d", j), "q1", clockStart.Add(-time.Duration(i+j*instances)*time.Millisecond))))
		}
		v0[id] = b.runningWith(t, id, tasks...).Version
	}
	var (
		mu      sync.Mutex
		leased  = map[string]string{} // task → claimer
		written = map[string]int64{}  // instance → writes made
		missed  int
		errs    []error
	)
	runConcurrently(claimers, func(i int) {
		owner := fmt.Sprintf("c%d", i)
		for range 100 {
			var writes []*store.ClaimWrite
			err := eq.ClaimTasks(b.ctx, store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: limit}, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
				writes = writes[:0]
				byInst := map[string][]store.Claimable{}
				var ids []string
				for _, c := range locked {
					if byInst[c.Instance.ID] == nil {
						ids = append(ids, c.Instance.ID)
					}
					byInst[c.Instance.ID] = append(byInst[c.Instance.ID], c)
				}
				slices.Sort(ids)
				for _, id := range ids {
					cs := byInst[id]
					w := &store.ClaimWrite{SetState: true, ExpectedVersion: cs[0].Instance.Version, State: claimedState(t, cs[0].Instance), Cause: "deliver " + owner}
					for _, c := range cs {
						w.Tasks = append(w.Tasks, claimLease(c.Task, owner, clockStart.Add(time.Minute), time.Time{}))
					}
					writes = append(writes, w)
				}
				return writes, nil
			})
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			for _, w := range writes {
				if !w.Written {
					missed++
					continue
				}
				written[w.Tasks[0].InstanceID]++
				for _, tk := range w.Tasks {
					if other, dup := leased[tk.ID]; dup {
						errs = append(errs, fmt.Errorf("task %s leased by %s and by %s", tk.ID, other, owner))
					}
					leased[tk.ID] = owner
				}
			}
			mu.Unlock()
			if err != nil || len(writes) == 0 {
				return
			}
		}
	})
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d writes skipped because their instance moved on", missed)
	if len(leased) != instances*perInstance {
		t.Errorf("%d tasks leased, want all %d", len(leased), instances*perInstance)
	}
	for id, v := range v0 {
		got := b.get(t, id)
		if string(got.State.Variables["claims"]) != strconv.FormatInt(written[id], 10) || got.Version != v+written[id] {
			t.Errorf("instance %s: claims %s, version %d; %d writes reported made from version %d", id, got.State.Variables["claims"], got.Version, written[id], v)
		}
		for j, e := range b.history(t, id) {
			if e.Version != int64(j) {
				t.Errorf("instance %s: history row %d has version %d", id, j, e.Version)
				break
			}
		}
		for _, tk := range b.tasksOf(t, eq, id) {
			if tk.Status != store.TaskLeased || tk.LeaseOwner != leased[tk.ID] || tk.Attempt != 1 {
				t.Errorf("task %s: %s, owner %q, attempt %d; want LEASED, %q, 1", tk.ID, tk.Status, tk.LeaseOwner, tk.Attempt, leased[tk.ID])
			}
		}
	}
}
