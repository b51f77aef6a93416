package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Whether a task may be claimed because of its instance's status is the
// engine's decision, stored on the row (store.Task.Held): the claims read
// the flag, never the status, and the writes store the flag they are
// given.
var heldTests = []conformanceTest{
	{"Held_claimReadsTheFlag", testHeldClaimReadsTheFlag},
	{"Held_groupClaimReadsTheFlag", testHeldGroupClaimReadsTheFlag},
	{"Held_writesStoreTheFlag", testHeldWritesStoreTheFlag},
}

// heldFixture makes a RUNNING and a PAUSED instance, each with a held and
// a free task of queue qh, and returns the ids of the free ones.
func (b *bundle) heldFixture(t testing.TB) []string {
	t.Helper()
	b.running(t, "run")
	b.running(t, "paused")
	b.transition(t, "paused", workflow.StatusRunning, workflow.StatusPaused)
	b.insertTasks(t,
		withID("run-held", held(newTask("run", "a", "qh", clockStart.Add(-2*time.Second)))),
		withID("run-free", newTask("run", "b", "qh", clockStart.Add(-time.Second))),
		withID("paused-held", held(newTask("paused", "a", "qh", clockStart.Add(-2*time.Second)))),
		// Free while its instance is PAUSED: the store does not second-guess it.
		withID("paused-free", newTask("paused", "b", "qh", clockStart)),
	)
	return []string{"run-free", "paused-free"}
}

func testHeldClaimReadsTheFlag(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	want := b.heldFixture(t)
	if got := b.claimIDs(t, eq, []string{"qh"}, clockStart, 10); !slices.Equal(got, want) {
		t.Errorf("the claim leased %v, want %v (the tasks not held, oldest first)", got, want)
	}
}

func testHeldGroupClaimReadsTheFlag(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	want := b.heldFixture(t)
	claim := &store.GroupClaim{Params: claimOf("node", []string{"qh"}, clockStart, 10)}
	if _, _, err := eq.ApplyGroup(b.ctx, nil, nil, claim); err != nil {
		t.Fatalf("ApplyGroup with a claim alone: %v", err)
	}
	if got := taskIDs(claimedTasks(claim.Claimed)); !slices.Equal(got, want) {
		t.Errorf("the group's claim leased %v, want %v (the tasks not held, oldest first)", got, want)
	}
}

// A versioned write stores the flags of the rows it inserts and updates;
// a write of task rows alone keeps the stored one, whatever its rows say
// (a pause may have held the row since it was read).
func testHeldWritesStoreTheFlag(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	inst := b.running(t, "w")
	b.insertTasks(t, withID("t1", held(newTask("w", "a", "q", clockStart))), withID("t2", newTask("w", "b", "q", clockStart)))
	if t1, t2 := b.lockTask(t, eq, "t1"), b.lockTask(t, eq, "t2"); !t1.Held || t2.Held {
		t.Fatalf("inserted: t1 held %v, t2 held %v; want true, false", t1.Held, t2.Held)
	}

	inst = b.get(t, inst.ID)
	r1, r2 := b.lockTask(t, eq, "t1"), b.lockTask(t, eq, "t2")
	u1, u2 := *r1, *r2
	u1.Held, u2.Held = false, true
	_, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
		State: inst.State, Cause: "hold", Update: []store.TaskWrite{{Task: &u1, Guard: store.GuardOf(r1)}, {Task: &u2, Guard: store.GuardOf(r2)}}})
	if err != nil {
		t.Fatalf("Apply of the flags: %v", err)
	}
	if t1, t2 := b.lockTask(t, eq, "t1"), b.lockTask(t, eq, "t2"); t1.Held || !t2.Held {
		t.Fatalf("after a versioned write: t1 held %v, t2 held %v; want false, true", t1.Held, t2.Held)
	}
	// One row alone, as a completion writes it.
	r2 = b.lockTask(t, eq, "t2")
	u2 = *r2
	u2.Held = false
	inst = b.get(t, inst.ID)
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
		State: inst.State, Cause: "release", Update: []store.TaskWrite{{Task: &u2, Guard: store.GuardOf(r2)}}}); err != nil {
		t.Fatalf("Apply of one flag: %v", err)
	}
	if b.lockTask(t, eq, "t2").Held {
		t.Fatal("after a versioned write of one row: t2 held, want not")
	}

	// A write of task rows alone keeps the stored flag.
	r1 = b.lockTask(t, eq, "t1")
	u1 = *r1
	u1.Held = true
	u1.LastError = "touched"
	if _, err := b.s.Apply(b.ctx, &store.Write{ID: inst.ID, TasksOnly: true, Update: []store.TaskWrite{{Task: &u1, Guard: store.GuardOf(r1)}}}); err != nil {
		t.Fatalf("tasks-only Apply: %v", err)
	}
	if got := b.lockTask(t, eq, "t1"); got.Held || got.LastError != "touched" {
		t.Errorf("after a tasks-only write: held %v, last error %q; want the stored flag (false) and the write's error", got.Held, got.LastError)
	}
}
