package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A run's cursor is found under its task and lease only, keeps the latest
// write when writes report out of order, follows a heartbeat, is forgotten
// when the instance stops running or the run ends, and stays bounded.
func TestRunCursors(t *testing.T) {
	var r runCursors
	inst := func(version int64, status workflow.Status) *workflow.Instance {
		return &workflow.Instance{ID: "w", Version: version, Status: status}
	}
	row := &store.Task{ID: "t", Status: store.TaskLeased, Lease: "l1"}
	r.put(inst(3, workflow.StatusRunning), row, 300)
	if c := r.get("t", "l2"); c != nil {
		t.Error("found under another lease")
	}
	r.put(inst(2, workflow.StatusRunning), row, 200)
	if c := r.get("t", "l1"); c == nil || c.inst.Version != 3 || c.stateLen != 300 {
		t.Errorf("after an earlier write reported late: %+v", c)
	}
	until := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	r.extended("t", "l1", until)
	if c := r.get("t", "l1"); c == nil || !c.row.LeaseUntil.Equal(until) {
		t.Errorf("after a heartbeat: %+v", c)
	}
	r.put(inst(4, workflow.StatusCompleted), row, 400)
	if c := r.get("t", "l1"); c != nil {
		t.Error("kept an instance that stopped running")
	}
	r.put(inst(5, workflow.StatusRunning), row, 0)
	r.drop("t")
	if c := r.get("t", "l1"); c != nil {
		t.Error("kept a run that ended")
	}
	r.put(inst(1, workflow.StatusRunning), &store.Task{ID: "q", Status: store.TaskQueued}, 0)
	if c := r.get("q", ""); c != nil {
		t.Error("kept a task that is not leased")
	}
	for i := range maxRunCursors + 10 {
		r.put(inst(1, workflow.StatusRunning), &store.Task{ID: fmt.Sprint(i), Status: store.TaskLeased, Lease: "l"}, 0)
	}
	if len(r.m) != maxRunCursors {
		t.Errorf("%d cursors kept, want at most %d", len(r.m), maxRunCursors)
	}
}
