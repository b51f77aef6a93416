package storetest

import (
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyEach: guarded writes of many instances in one transaction, those
// that miss left out; and the order of a group's writes and creates.

var applyEachTests = []conformanceTest{
	{"ApplyEach_leavesOutMisses", testApplyEachLeavesOutMisses},
	{"ApplyEach_failureWritesNothing", testApplyEachFailureWritesNothing},
	{"ApplyEach_invalid", testApplyEachInvalid},
	{"ApplyGroup_writesBeforeCreates", testApplyGroupWritesBeforeCreates},
}

// pauseWrite is the write that moves inst, as read, to PAUSED.
func pauseWrite(inst *workflow.Instance) *store.Write {
	return &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: workflow.StatusPaused,
		State: inst.State, Deadline: inst.Deadline, Cause: "pause"}
}

func testApplyEachLeavesOutMisses(t *testing.T, h Harness) {
	b := setup(t, h)
	ok := b.create(t, store.CreateParams{ID: "ok", Status: workflow.StatusRunning})
	stale := b.create(t, store.CreateParams{ID: "stale", Status: workflow.StatusRunning})
	moved := *stale
	if _, err := b.s.Apply(b.ctx, pauseWrite(stale)); err != nil { // another writer got there first
		t.Fatal(err)
	}
	staleSnap := b.snapshot(t, "stale")
	gone := *ok
	gone.ID = "gone"
	written, err := b.s.ApplyEach(b.ctx, []*store.Write{pauseWrite(&moved), pauseWrite(&gone), pauseWrite(ok)})
	if err != nil {
		t.Fatalf("ApplyEach: %v", err)
	}
	if len(written) != 3 || written[0] != nil || written[1] != nil || written[2] == nil {
		t.Fatalf("ApplyEach = %v; want [nil nil ok]: the stale and the unknown write left out", written)
	}
	if got := written[2]; got.ID != "ok" || got.Status != workflow.StatusPaused || got.Version != ok.Version+1 {
		t.Errorf("the write made returned %s %s version %d; want ok PAUSED version %d", got.ID, got.Status, got.Version, ok.Version+1)
	}
	if got := b.get(t, "ok"); got.Status != workflow.StatusPaused || got.Version != ok.Version+1 || len(b.history(t, "ok")) != 2 {
		t.Errorf("ok after ApplyEach: %s version %d with %d history rows; want PAUSED, %d, 2", got.Status, got.Version, len(b.history(t, "ok")), ok.Version+1)
	}
	b.unchanged(t, "the stale write's instance", staleSnap)
	b.wantAbsent(t, "an unknown instance's write", "gone")
}

// A write that fails for another reason than a miss (here the slot guard)
// fails the whole call: nothing of it is written.
func testApplyEachFailureWritesNothing(t *testing.T, h Harness) {
	b := setup(t, h)
	ok := b.create(t, store.CreateParams{ID: "ok", Status: workflow.StatusRunning})
	b.create(t, slotted("holder", "d", "k", 1, workflow.StatusRunning))
	waiting := b.create(t, slotted("waiting", "d", "k", 1, workflow.StatusQueued))
	snaps := []snapshot{b.snapshot(t, "ok"), b.snapshot(t, "holder"), b.snapshot(t, "waiting")}
	start := &store.Write{ID: waiting.ID, ExpectedVersion: waiting.Version, From: waiting.Status, Status: workflow.StatusRunning,
		State: waiting.State, Cause: "start"}
	written, err := b.s.ApplyEach(b.ctx, []*store.Write{pauseWrite(ok), start})
	wantLimit(t, "ApplyEach over a key's limit", err)
	if written != nil {
		t.Errorf("a failed ApplyEach returned %v", written)
	}
	for _, s := range snaps {
		b.unchanged(t, "after a failed ApplyEach", s)
	}
}

func testApplyEachInvalid(t *testing.T, h Harness) {
	b := setup(t, h)
	inst := b.create(t, store.CreateParams{ID: "w", Status: workflow.StatusRunning})
	snap := b.snapshot(t, "w")
	tasksOnly := pauseWrite(inst)
	tasksOnly.TasksOnly = true
	for name, ws := range map[string][]*store.Write{
		"a nil write":          {pauseWrite(inst), nil},
		"a tasks-only write":   {tasksOnly},
		"two writes of one id": {pauseWrite(inst), pauseWrite(inst)},
	} {
		_, err := b.s.ApplyEach(b.ctx, ws)
		wantErrorIs(t, "ApplyEach with "+name, err, store.ErrInvalidArgument)
	}
	b.unchanged(t, "after invalid ApplyEach calls", snap)
	written, err := b.s.ApplyEach(b.ctx, nil)
	if err != nil || len(written) != 0 {
		t.Errorf("ApplyEach of nothing = %v, %v; want none, nil", written, err)
	}
}

// A group's writes of instances that exist are made before its creates,
// and its writes of the instances it creates after them: a create takes
// the slot the group's cancel frees, and a new instance is written at the
// version its create left.
func testApplyGroupWritesBeforeCreates(t *testing.T, h Harness) {
	b := setup(t, h)
	holder := b.create(t, slotted("holder", "d", "k", 1, workflow.StatusRunning))
	cancel := &store.Write{ID: holder.ID, ExpectedVersion: holder.Version, From: holder.Status, Status: workflow.StatusCancelled,
		State: holder.State, Cause: "make room"}
	fresh := slotted("fresh", "d", "k", 1, workflow.StatusRunning)
	queued := store.CreateParams{ID: "later", Status: workflow.StatusQueued}
	cancelLater := &store.Write{ID: "later", ExpectedVersion: 0, From: workflow.StatusQueued, Status: workflow.StatusCancelled, Cause: "cancelled at once"}
	created, written, err := b.s.ApplyGroup(b.ctx, []store.CreateParams{fresh, queued}, []*store.Write{cancelLater, cancel}, nil)
	if err != nil {
		t.Fatalf("ApplyGroup: %v", err)
	}
	if len(created) != 2 || len(written) != 2 || written[0].ID != "later" || written[1].ID != "holder" {
		t.Fatalf("ApplyGroup = %v, %v; want both created and the writes in the order given", created, written)
	}
	for id, want := range map[string]struct {
		status  workflow.Status
		version int64
	}{"holder": {workflow.StatusCancelled, holder.Version + 1}, "fresh": {workflow.StatusRunning, 0}, "later": {workflow.StatusCancelled, 1}} {
		if got := b.get(t, id); got.Status != want.status || got.Version != want.version {
			t.Errorf("%s: %s version %d; want %s version %d", id, got.Status, got.Version, want.status, want.version)
		}
	}
}
