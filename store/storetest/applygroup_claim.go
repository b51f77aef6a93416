package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
)

// Conformance of store.GroupClaim: the claim an ApplyGroup makes after its
// creates and writes, in their transaction.

var groupClaimTests = []conformanceTest{
	{"ApplyGroup_claim", testGroupClaimOK},
	{"ApplyGroup_claimAllOrNothing", testGroupClaimAllOrNothing},
}

// The claim sees the group's new instance and the task its write queued,
// at the versions the group wrote, leases them with the group as
// ClaimTasks would and fills in GroupClaim.Claimed; no instance is
// written by it, and tasks of other queues stay queued.
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
	claim := &store.GroupClaim{Params: claimOf("n", []string{"q1"}, now, 5)}
	created, written, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p1}, []*store.Write{w}, claim)
	if err != nil {
		t.Fatalf("ApplyGroup with a claim: %v", err)
	}
	if len(created) != 1 || len(written) != 1 || written[0].Version != inst.Version+1 {
		t.Fatalf("ApplyGroup = %v created, %v written; want 1 and version %d", created, written, inst.Version+1)
	}
	if first.ID == "" || next.ID == "" {
		t.Fatalf("tasks not filled in: first %+v, next %+v", first, next)
	}
	// The write's task (run_at now) and the create's: both queued by the group.
	if ids := taskIDs(claimedTasks(claim.Claimed)); len(ids) != 2 || !slices.Contains(ids, first.ID) || !slices.Contains(ids, next.ID) {
		t.Fatalf("Claimed = %v, want the tasks %s and %s the group queued", ids, first.ID, next.ID)
	}
	tokens := map[string]bool{}
	// The claim returns its instances as stored, as Get reads them (the
	// attempts in flight are shown by GetWithAttemptsInFlight alone).
	for _, c := range claim.Claimed {
		stored := b.get(t, c.Task.InstanceID)
		// The instance as the group left it, and not written by the claim.
		returned := *c.Instance
		if diff := cmp.Diff(viewOf(stored), viewOf(&returned)); diff != "" {
			t.Errorf("task %s: its instance as returned (-stored +returned):\n%s", c.Task.ID, diff)
		}
		if want := map[string]int64{"s1": 0, "w1": written[0].Version}[stored.ID]; stored.Version != want {
			t.Errorf("%s: version %d after the group, want %d (the claim writes no instance)", stored.ID, stored.Version, want)
		}
		tk := c.Task
		if tk.Status != store.TaskLeased || tk.Attempt != 1 || tk.LeaseOwner != "n" || tk.Lease == "" || tokens[tk.Lease] ||
			!tk.LeaseUntil.Equal(store.Timestamp(now.Add(time.Minute))) {
			t.Errorf("task %s as the group's claim returned it: %+v; want LEASED to n for a minute, attempt 1, a fresh token", tk.ID, tk)
		}
		tokens[tk.Lease] = true
		assertTask(t, "task leased by the group's claim", tk, b.lockTask(t, eq, tk.ID))
	}
	if h := b.history(t, "w1"); h[len(h)-1].Version != written[0].Version || h[len(h)-1].Cause != "step a completed" {
		t.Errorf("w1's last history row %+v, want the group's write", h[len(h)-1])
	}
	b.tasksUnchanged(t, eq, "a task of another queue", other)

	// Nothing to claim: Claimed is empty, the group is written.
	p2, second := groupStart("s2", now)
	claim = &store.GroupClaim{Params: claimOf("n", []string{"q9"}, now, 1)}
	if created, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p2}, nil, claim); err != nil || len(created) != 1 || len(claim.Claimed) != 0 {
		t.Errorf("ApplyGroup with a claim of nothing = %v, %v, claimed %v; want the instance, nothing claimed", created, err, taskIDs(claimedTasks(claim.Claimed)))
	}
	// A claim alone.
	claim = &store.GroupClaim{Params: claimOf("n2", []string{"q1"}, now, 5)}
	if _, _, err := eq.ApplyGroup(b.ctx, nil, nil, claim); err != nil || !slices.Equal(taskIDs(claimedTasks(claim.Claimed)), []string{second.ID}) {
		t.Errorf("ApplyGroup with a claim alone: %v; claimed %v; want s2's task", err, taskIDs(claimedTasks(claim.Claimed)))
	}
}

// Whatever fails in a group with a claim — a write, the claim's
// parameters — writes nothing of it: no instance, no write, no lease, and
// nothing reported claimed.
func testGroupClaimAllOrNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	b.putDefinition(t, b.defs(t), "d", `{"v":1}`, 1, true)
	now := b.clock.Now()
	inst, tk := b.leasedFixture(t, eq, "w1")
	snap := b.snapshot(t, "w1")
	b.runningWith(t, "p", withID("p-a", newTask("p", "a", "q1", clockStart)))
	pSnap, pTasks := b.snapshot(t, "p"), b.readTasks(t, eq, "p")
	for _, tc := range []struct {
		name   string
		change func(w *store.Write, p *store.ClaimParams)
		want   error
	}{
		{"a stale lease of the write", func(w *store.Write, _ *store.ClaimParams) { w.Update[0].Guard.Lease = "stale" }, store.ErrConflict},
		{"limit 0", func(_ *store.Write, p *store.ClaimParams) { p.Limit = 0 }, store.ErrInvalidArgument},
		{"no owner", func(_ *store.Write, p *store.ClaimParams) { p.Owner = "" }, store.ErrInvalidArgument},
		{"no lease", func(_ *store.Write, p *store.ClaimParams) { p.Lease = 0 }, store.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.countAll(t)
			p1, _ := groupStart("g1", now)
			w, next := completion(b.get(t, inst.ID), tk, now)
			claim := &store.GroupClaim{Params: claimOf("n", []string{"q1"}, now, 5)}
			tc.change(w, &claim.Params)
			_, _, err := eq.ApplyGroup(b.ctx, []store.CreateParams{p1}, []*store.Write{w}, claim)
			wantErrorIs(t, "ApplyGroup with "+tc.name, err, tc.want)
			if len(claim.Claimed) != 0 {
				t.Errorf("ApplyGroup with %s: Claimed = %v, want nothing", tc.name, taskIDs(claimedTasks(claim.Claimed)))
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
