package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
)

// Conformance of store.GroupClaim: the claim a CommitGroup makes after its
// creates and commits, in their transaction.

var groupClaimTests = []conformanceTest{
	{"CommitGroup_claim", testGroupClaimOK},
	{"CommitGroup_claimAllOrNothing", testGroupClaimAllOrNothing},
	{"CommitGroup_claimInTx", testGroupClaimInTx},
}

// deliverAll is a decide function that leases every locked task to "n",
// each with its instance's next version, and records the instances' versions
// as read by task id.
func deliverAll(t testing.TB, until time.Time, read map[string]int64, writes *[]*store.ClaimWrite) func([]store.Claimable) ([]*store.ClaimWrite, error) {
	return func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		*writes = (*writes)[:0]
		for _, l := range locked {
			read[l.Task.InstanceID] = l.Instance.Version
			*writes = append(*writes, &store.ClaimWrite{Tasks: []*store.Task{claimLease(l.Task, "n", until, time.Time{})},
				SetState: true, ExpectedVersion: l.Instance.Version, State: claimedState(t, l.Instance), Cause: "deliver " + l.Task.StepID})
		}
		return *writes, nil
	}
}

// The claim sees the group's new instance and the task its commit queued,
// at the versions the group wrote, and leases them with the group; tasks of
// other queues stay queued.
func testGroupClaimOK(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	inst, tk := b.commitFixture(t, eq, "w1")
	c, next := completion(b.get(t, inst.ID), tk, now)
	p1, first := groupStart("s1", now)
	b.runningWith(t, "other", withID("other-a", newTask("other", "a", "q2", clockStart)))
	other := b.readTasks(t, eq, "other")
	until := now.Add(time.Minute)
	read := map[string]int64{}
	var writes []*store.ClaimWrite
	claim := &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: deliverAll(t, until, read, &writes)}
	insts, vs, err := eq.CommitGroup(b.ctx, []store.CreateParams{p1}, []store.StepCommit{c}, claim)
	if err != nil {
		t.Fatalf("CommitGroup with a claim: %v", err)
	}
	if len(insts) != 1 || len(vs) != 1 || vs[0] != inst.Version+1 {
		t.Fatalf("CommitGroup = %d instances, versions %v; want 1 and [%d]", len(insts), vs, inst.Version+1)
	}
	if want := map[string]int64{"s1": 0, "w1": vs[0]}; fmt.Sprint(read) != fmt.Sprint(want) {
		t.Errorf("the claim read instances at versions %v, want %v (the group's own writes)", read, want)
	}
	for _, w := range writes {
		id := w.Tasks[0].InstanceID
		got := b.get(t, id)
		if !w.Written || w.Instance == nil || w.Instance.Version != read[id]+1 || got.Version != read[id]+1 {
			t.Errorf("%s: written %v, returned %+v, stored version %d; want version %d", id, w.Written, w.Instance, got.Version, read[id]+1)
		}
		if string(got.State.Variables["claims"]) != "1" {
			t.Errorf("%s: claims = %s, want 1", id, got.State.Variables["claims"])
		}
		if h := b.history(t, id); h[len(h)-1].Cause != "deliver "+w.Tasks[0].StepID || h[len(h)-1].Version != got.Version {
			t.Errorf("%s: last history row %+v, want the delivery at version %d", id, h[len(h)-1], got.Version)
		}
		assertTask(t, "task leased by the group's claim", w.Tasks[0], b.lockTask(t, eq, w.Tasks[0].ID))
	}
	if first.ID == "" || next.ID == "" {
		t.Fatalf("tasks not filled in: first %+v, next %+v", first, next)
	}
	for _, id := range []string{first.ID, next.ID} {
		if tk := b.lockTask(t, eq, id); tk.Status != store.TaskLeased || tk.Attempt != 1 || tk.LeaseOwner != "n" {
			t.Errorf("task %s after the group: %s, attempt %d, owner %q; want LEASED, 1, n", id, tk.Status, tk.Attempt, tk.LeaseOwner)
		}
	}
	b.tasksUnchanged(t, eq, "a task of another queue", other)

	// Nothing to claim: decide sees nothing, the group is written.
	p2, _ := groupStart("s2", now)
	called := false
	claim = &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q9"}, Now: now, Limit: 1},
		Decide: func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
			called = true
			if len(locked) != 0 {
				return nil, fmt.Errorf("locked %d tasks of an empty queue", len(locked))
			}
			return nil, nil
		}}
	if insts, _, err := eq.CommitGroup(b.ctx, []store.CreateParams{p2}, nil, claim); err != nil || len(insts) != 1 || !called {
		t.Errorf("CommitGroup with a claim of nothing = %v, %v (decide called: %v); want the instance", insts, err, called)
	}
	// A claim alone.
	read = map[string]int64{}
	claim = &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: deliverAll(t, until, read, &writes)}
	if _, _, err := eq.CommitGroup(b.ctx, nil, nil, claim); err != nil || len(writes) != 1 || !writes[0].Written || writes[0].Tasks[0].InstanceID != "s2" {
		t.Errorf("CommitGroup with a claim alone: %v; writes %v; want s2's task claimed", err, writes)
	}
}

// Whatever fails in a group with a claim — a commit, decide, a write decide
// returns — writes nothing of it: no instance, no commit, no lease.
func testGroupClaimAllOrNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	inst, tk := b.commitFixture(t, eq, "w1")
	snap := b.snapshot(t, "w1")
	b.runningWith(t, "p", withID("p-a", newTask("p", "a", "q1", clockStart)))
	pSnap, pTasks := b.snapshot(t, "p"), b.readTasks(t, eq, "p")
	until := now.Add(time.Minute)
	errDecide := errors.New("decide failed")
	for _, tc := range []struct {
		name   string
		commit func(c *store.StepCommit)
		claim  func(read map[string]int64, writes *[]*store.ClaimWrite) *store.GroupClaim
		want   error
	}{
		{"a stale lease of the commit", func(c *store.StepCommit) { c.Lease = "stale" },
			func(read map[string]int64, writes *[]*store.ClaimWrite) *store.GroupClaim {
				return &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: deliverAll(t, until, read, writes)}
			}, store.ErrConflict},
		{"decide fails", nil, func(read map[string]int64, writes *[]*store.ClaimWrite) *store.GroupClaim {
			deliver := deliverAll(t, until, read, writes)
			return &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: func(l []store.Claimable) ([]*store.ClaimWrite, error) {
				if _, err := deliver(l); err != nil {
					return nil, err
				}
				return nil, errDecide
			}}
		}, errDecide},
		{"a task not leased", nil, func(read map[string]int64, writes *[]*store.ClaimWrite) *store.GroupClaim {
			deliver := deliverAll(t, until, read, writes)
			return &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: func(l []store.Claimable) ([]*store.ClaimWrite, error) {
				ws, err := deliver(l)
				if len(ws) > 0 {
					ws[len(ws)-1].Tasks[0].Status = store.TaskQueued
				}
				return ws, err
			}}
		}, store.ErrInvalidArgument},
		{"no decide function", nil, func(map[string]int64, *[]*store.ClaimWrite) *store.GroupClaim {
			return &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}}
		}, store.ErrInvalidArgument},
		{"limit 0", nil, func(read map[string]int64, writes *[]*store.ClaimWrite) *store.GroupClaim {
			return &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now}, Decide: deliverAll(t, until, read, writes)}
		}, store.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.countAll(t)
			p1, _ := groupStart("g1", now)
			c, next := completion(b.get(t, inst.ID), tk, now)
			if tc.commit != nil {
				tc.commit(&c)
			}
			var writes []*store.ClaimWrite
			_, _, err := eq.CommitGroup(b.ctx, []store.CreateParams{p1}, []store.StepCommit{c}, tc.claim(map[string]int64{}, &writes))
			wantErrorIs(t, "CommitGroup with "+tc.name, err, tc.want)
			for _, w := range writes {
				if w.Written || w.Instance != nil {
					t.Errorf("CommitGroup with %s: a claim write reported written: %+v", tc.name, w)
				}
			}
			if n := b.countAll(t); n != before {
				t.Errorf("CommitGroup with %s: %d instances, want %d", tc.name, n, before)
			}
			b.unchanged(t, "w1 after CommitGroup with "+tc.name, snap)
			assertTask(t, "w1's task after CommitGroup with "+tc.name, tk, b.lockTask(t, eq, tk.ID))
			if _, err := eq.Task(b.ctx, next.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the completion's new task after CommitGroup with %s: Task = %v, want ErrNotFound", tc.name, err)
			}
			b.unchanged(t, "p after CommitGroup with "+tc.name, pSnap)
			b.tasksUnchanged(t, eq, "p's task after CommitGroup with "+tc.name, pTasks)
		})
	}
}

// Inside WithTx the group's claim is part of the caller's transaction:
// rolled back with it, committed with it.
func testGroupClaimInTx(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.runningWith(t, "a", withID("ta", newTask("a", "a", "q1", clockStart)))
	before := b.readTasks(t, eq, "a")
	snap := b.snapshot(t, "a")
	until := clockStart.Add(time.Minute)
	errAbort := errors.New("abort")
	for _, abort := range []bool{true, false} {
		var writes []*store.ClaimWrite
		err := b.inEngineTx(func(_ store.Querier, teq store.EngineQuerier) error {
			claim := &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: clockStart, Limit: 1},
				Decide: deliverAll(t, until, map[string]int64{}, &writes)}
			if _, _, err := teq.CommitGroup(b.ctx, nil, nil, claim); err != nil {
				return err
			}
			if len(writes) != 1 || !writes[0].Written {
				return fmt.Errorf("the claim made %d writes: %v", len(writes), writes)
			}
			if abort {
				return errAbort
			}
			return nil
		})
		if abort {
			wantErrorIs(t, "a transaction whose group claims and that fails", err, errAbort)
			b.unchanged(t, "after the rolled-back group", snap)
			b.tasksUnchanged(t, eq, "after the rolled-back group", before)
			continue
		}
		if err != nil {
			t.Fatalf("a transaction whose group claims: %v", err)
		}
		b.claimCommitted(t, eq, "after the committed group", snap, "ta")
	}
}
