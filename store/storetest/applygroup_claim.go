package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
)

// Conformance of store.GroupClaim: the claim an ApplyGroup makes after its
// creates and writes, in their transaction.

var groupClaimTests = []conformanceTest{
	{"ApplyGroup_claim", testGroupClaimOK},
	{"ApplyGroup_claimAllOrNothing", testGroupClaimAllOrNothing},
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
	inst, tk := b.leasedFixture(t, eq, "w1")
	w, next := completion(b.get(t, inst.ID), tk, now)
	p1, first := groupStart("s1", now)
	b.runningWith(t, "other", withID("other-a", newTask("other", "a", "q2", clockStart)))
	other := b.readTasks(t, eq, "other")
	until := now.Add(time.Minute)
	read := map[string]int64{}
	var claimed []*store.ClaimWrite
	claim := &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: deliverAll(t, until, read, &claimed)}
	created, written, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p1}, []*store.Write{w}, claim)
	if err != nil {
		t.Fatalf("ApplyGroup with a claim: %v", err)
	}
	if len(created) != 1 || len(written) != 1 || written[0].Version != inst.Version+1 {
		t.Fatalf("ApplyGroup = %v created, %v written; want 1 and version %d", created, written, inst.Version+1)
	}
	if want := map[string]int64{"s1": 0, "w1": written[0].Version}; fmt.Sprint(read) != fmt.Sprint(want) {
		t.Errorf("the claim read instances at versions %v, want %v (the group's own writes)", read, want)
	}
	for _, w := range claimed {
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
	if created, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p2}, nil, claim); err != nil || len(created) != 1 || !called {
		t.Errorf("ApplyGroup with a claim of nothing = %v, %v (decide called: %v); want the instance", created, err, called)
	}
	// A claim alone.
	read = map[string]int64{}
	claim = &store.GroupClaim{Params: store.ClaimParams{Queues: []string{"q1"}, Now: now, Limit: 5}, Decide: deliverAll(t, until, read, &claimed)}
	if _, _, err := eq.ApplyGroup(b.ctx, nil, nil, claim); err != nil || len(claimed) != 1 || !claimed[0].Written || claimed[0].Tasks[0].InstanceID != "s2" {
		t.Errorf("ApplyGroup with a claim alone: %v; writes %v; want s2's task claimed", err, claimed)
	}
}

// Whatever fails in a group with a claim — a write, decide, a write decide
// returns — writes nothing of it: no instance, no write, no lease.
func testGroupClaimAllOrNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	inst, tk := b.leasedFixture(t, eq, "w1")
	snap := b.snapshot(t, "w1")
	b.runningWith(t, "p", withID("p-a", newTask("p", "a", "q1", clockStart)))
	pSnap, pTasks := b.snapshot(t, "p"), b.readTasks(t, eq, "p")
	until := now.Add(time.Minute)
	errDecide := errors.New("decide failed")
	for _, tc := range []struct {
		name   string
		change func(w *store.Write)
		claim  func(read map[string]int64, writes *[]*store.ClaimWrite) *store.GroupClaim
		want   error
	}{
		{"a stale lease of the write", func(w *store.Write) { w.Update[0].Guard.Lease = "stale" },
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
			w, next := completion(b.get(t, inst.ID), tk, now)
			if tc.change != nil {
				tc.change(w)
			}
			var claimed []*store.ClaimWrite
			_, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p1}, []*store.Write{w}, tc.claim(map[string]int64{}, &claimed))
			wantErrorIs(t, "ApplyGroup with "+tc.name, err, tc.want)
			for _, cw := range claimed {
				if cw.Written || cw.Instance != nil {
					t.Errorf("ApplyGroup with %s: a claim write reported written: %+v", tc.name, cw)
				}
			}
			if n := b.countAll(t); n != before {
				t.Errorf("ApplyGroup with %s: %d instances, want %d", tc.name, n, before)
			}
			b.unchanged(t, "w1 after ApplyGroup with "+tc.name, snap)
			assertTask(t, "w1's task after ApplyGroup with "+tc.name, tk, b.lockTask(t, eq, tk.ID))
			if _, err := eq.Task(b.ctx, next.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the completion's new task after ApplyGroup with %s: Task = %v, want ErrNotFound", tc.name, err)
			}
			b.unchanged(t, "p after ApplyGroup with "+tc.name, pSnap)
			b.tasksUnchanged(t, eq, "p's task after ApplyGroup with "+tc.name, pTasks)
		})
	}
}
