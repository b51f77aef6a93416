package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var deleteTreeTests = []conformanceTest{
	{"DeleteInstance_children", testDeleteInstanceChildren},
	{"DeleteInstance_liveChild", testDeleteInstanceLiveChild},
	{"PruneInstances_children", testPruneInstancesChildren},
}

// childOf creates a child workflow id of parent (with tasks, history and
// an idempotency key, as finished does) and moves it to status, through
// RUNNING.
func (b *bundle) childOf(t testing.TB, id, parent string, status workflow.Status) {
	t.Helper()
	now := b.clock.Now()
	b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepState(),
		Parent:         &workflow.ParentRef{WorkflowID: parent, Step: "s"},
		IdempotencyKey: "key-" + id, RequestHash: "h",
		Tasks: []*store.Task{newTask("", "a", "q1", now)}})
	if status != workflow.StatusRunning {
		b.transition(t, id, workflow.StatusRunning, status)
	}
}

// A finished workflow goes with its children and theirs, each with its
// history, tasks and idempotency key; another tree stays.
func testDeleteInstanceChildren(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "root", Status: workflow.StatusRunning, State: stepState()})
	b.childOf(t, "c1", "root", workflow.StatusCompleted)
	b.childOf(t, "c2", "root", workflow.StatusFailed)
	b.childOf(t, "g1", "c1", workflow.StatusCancelled)
	b.childOf(t, "g2", "c1", workflow.StatusTimedOut)
	b.create(t, store.CreateParams{ID: "other", Status: workflow.StatusRunning, State: stepState()})
	b.childOf(t, "other-child", "other", workflow.StatusCompleted)
	b.transition(t, "other", workflow.StatusRunning, workflow.StatusCompleted)
	kept := []snapshot{b.snapshot(t, "other"), b.snapshot(t, "other-child")}
	done := b.transition(t, "root", workflow.StatusRunning, workflow.StatusCompleted)

	if err := b.s.DeleteInstance(b.ctx, "root", &done.Version); err != nil {
		t.Fatalf("DeleteInstance(root): %v", err)
	}
	for _, id := range []string{"root", "c1", "c2", "g1", "g2"} {
		b.wantDeleted(t, "after deleting root", id)
	}
	for _, snap := range kept {
		b.unchanged(t, "another tree", snap)
	}
	// The children's idempotency keys are free again.
	again := b.create(t, store.CreateParams{ID: "again", IdempotencyKey: "key-g1", RequestHash: "other"})
	if again.ID != "again" {
		t.Errorf("the deleted child's key made %s", again.ID)
	}
	// Deleting a child alone leaves its parent.
	if err := b.s.DeleteInstance(b.ctx, "other-child", nil); err != nil {
		t.Fatalf("DeleteInstance(other-child): %v", err)
	}
	b.wantDeleted(t, "a deleted child", "other-child")
	b.unchanged(t, "the parent of a deleted child", kept[0])
}

// A finished workflow with a child, or a grandchild, that has not
// finished is not deleted: ErrNotTerminal naming that one, and nothing of
// the tree goes. Once it has finished, the tree goes.
func testDeleteInstanceLiveChild(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "root", Status: workflow.StatusRunning, State: stepState()})
	b.childOf(t, "done", "root", workflow.StatusCompleted)
	b.childOf(t, "live", "root", workflow.StatusRunning)
	b.transition(t, "root", workflow.StatusRunning, workflow.StatusFailed)
	tree := []string{"root", "done", "live"}
	snaps := func() []snapshot {
		var s []snapshot
		for _, id := range tree {
			s = append(s, b.snapshot(t, id))
		}
		return s
	}
	before := snaps()
	err := b.s.DeleteInstance(b.ctx, "root", nil)
	wantErrorIs(t, "deleting a parent with a RUNNING child", err, store.ErrNotTerminal)
	if err == nil || !strings.Contains(err.Error(), `child workflow "live" that is RUNNING`) {
		t.Errorf("the error does not name the live child: %v", err)
	}
	for _, snap := range before {
		b.unchanged(t, "after a refused delete", snap)
	}

	b.childOf(t, "grand", "live", workflow.StatusPaused)
	tree = append(tree, "grand")
	b.transition(t, "live", workflow.StatusRunning, workflow.StatusCancelled)
	before = snaps()
	root := b.get(t, "root")
	err = b.s.DeleteInstance(b.ctx, "root", &root.Version)
	wantErrorIs(t, "deleting a parent with a PAUSED grandchild", err, store.ErrNotTerminal)
	if err == nil || !strings.Contains(err.Error(), `descendant workflow "grand" (a child of "live") that is PAUSED`) {
		t.Errorf("the error does not name the live grandchild: %v", err)
	}
	for _, snap := range before {
		b.unchanged(t, "after a refused delete", snap)
	}

	b.transition(t, "grand", workflow.StatusPaused, workflow.StatusCancelled)
	if err := b.s.DeleteInstance(b.ctx, "root", &root.Version); err != nil {
		t.Fatalf("DeleteInstance once every descendant finished: %v", err)
	}
	for _, id := range tree {
		b.wantDeleted(t, "the finished tree", id)
	}
}

// Retention deletes an expired workflow with its children, whatever their
// own age, and an expired child on its own; an expired workflow with a
// live child stays, with its tree, until that child finishes.
func testPruneInstancesChildren(t *testing.T, h Harness) {
	b := setup(t, h)
	b.create(t, store.CreateParams{ID: "old", Status: workflow.StatusRunning, State: stepState()})
	b.childOf(t, "old-child", "old", workflow.StatusCompleted)
	b.create(t, store.CreateParams{ID: "busy", Status: workflow.StatusRunning, State: stepState()})
	b.childOf(t, "busy-child", "busy", workflow.StatusRunning)
	b.create(t, store.CreateParams{ID: "young", Status: workflow.StatusRunning, State: stepState()})
	b.childOf(t, "young-child", "young", workflow.StatusCompleted)
	b.childOf(t, "late-child", "old", workflow.StatusRunning)
	b.childOf(t, "late-grandchild", "late-child", workflow.StatusCompleted)
	b.transition(t, "busy", workflow.StatusRunning, workflow.StatusFailed)
	b.transition(t, "old", workflow.StatusRunning, workflow.StatusFailed)
	cutoff := b.clock.Advance(time.Minute)
	b.clock.Advance(time.Minute)
	b.transition(t, "young", workflow.StatusRunning, workflow.StatusCompleted)
	// Cancelled after its parent stopped: younger than the cutoff.
	b.transition(t, "late-child", workflow.StatusRunning, workflow.StatusCancelled)
	kept := []snapshot{b.snapshot(t, "busy"), b.snapshot(t, "busy-child"), b.snapshot(t, "young")}

	p := store.PruneParams{Kind: store.PruneInstances, Before: cutoff, Limit: store.MaxDeleteFinished}
	got := b.deleteFinished(t, p)
	want := []string{"late-child", "late-grandchild", "old", "old-child", "young-child"}
	if !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	for _, id := range want {
		b.wantDeleted(t, "expired", id)
	}
	for _, snap := range kept {
		b.unchanged(t, "kept "+snap.inst.ID, snap)
	}

	b.transition(t, "busy-child", workflow.StatusRunning, workflow.StatusCancelled)
	if got := b.deleteFinished(t, p); !slices.Equal(got, []string{"busy", "busy-child"}) {
		t.Errorf("once the child finished: deleted %v, want busy and busy-child", got)
	}
}
