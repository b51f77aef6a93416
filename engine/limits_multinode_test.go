package engine_test

import (
	"testing"
	"time"

	"github.com/flowd/flowd/workflow"
)

// Two engines on one PostgreSQL database start the children of one tree
// at once (eight per workflow, on whichever node claims each step): the
// count of the top-level workflow's descendants is exact, so the tree
// holds exactly MaxDescendants of them, never one more.
func TestMultiNodeDescendantLimitIsExact(t *testing.T) {
	b := postgresBackend(t)
	addr := b.newDB(t)
	a := newNode(t, b, addr, nodeOpts{maxDescendants: 40, workers: 8})
	newNode(t, b, addr, nodeOpts{maxDescendants: 40, workers: 8})
	a.define("name: wide\nsteps:\n  - {id: sub, type: workflow, definition: wide, foreach: '[1, 2, 3, 4, 5, 6, 7, 8]'}\n")
	root := a.start("wide", "root", "")
	a.waitStatus(root.ID, workflow.StatusFailed, 20*time.Second)
	a.waitNoneRunning(15 * time.Second)
	if all := a.all(); len(all) != 41 {
		t.Errorf("%d workflows, want the top-level one and exactly 40 descendants", len(all))
	}
}
