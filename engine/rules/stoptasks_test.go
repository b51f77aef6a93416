package rules

import (
	"encoding/json"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// A status that stops the instance cancels its active tasks, keeps the
// write a change already makes of a task, and leaves finished ones; a
// status that does not stop it, or an instance already stopped, cancels
// nothing.
func TestStopTasks(t *testing.T) {
	rows := []store.Task{
		{ID: "queued", Status: store.TaskQueued},
		{ID: "leased", Status: store.TaskLeased, Lease: "l1"},
		{ID: "done", Status: store.TaskDone},
		{ID: "written", Status: store.TaskLeased, Lease: "l2"},
	}
	cancelled := func(ch Change) map[string]store.TaskStatus {
		m := map[string]store.TaskStatus{}
		for _, u := range ch.Update {
			m[u.Task.ID] = u.Task.Status
		}
		return m
	}
	for _, tc := range []struct {
		from, to workflow.Status
		settled  workflow.Status
		want     map[string]store.TaskStatus
	}{
		{workflow.StatusRunning, workflow.StatusFailed, "", map[string]store.TaskStatus{"queued": store.TaskCancelled, "leased": store.TaskCancelled, "written": store.TaskQueued}},
		{workflow.StatusPaused, workflow.StatusCancelled, "", map[string]store.TaskStatus{"queued": store.TaskCancelled, "leased": store.TaskCancelled, "written": store.TaskQueued}},
		{workflow.StatusPaused, workflow.StatusRunning, workflow.StatusFailed, map[string]store.TaskStatus{"queued": store.TaskCancelled, "leased": store.TaskCancelled, "written": store.TaskQueued}},
		{workflow.StatusRunning, workflow.StatusPaused, "", map[string]store.TaskStatus{"written": store.TaskQueued}},
		{workflow.StatusFailed, workflow.StatusFailed, "", map[string]store.TaskStatus{"written": store.TaskQueued}},
	} {
		ch := Change{Status: tc.to, Settled: tc.settled, Update: []TaskUpdate{{Task: store.Task{ID: "written", Status: store.TaskQueued}}}}
		ch.StopTasks(tc.from, rows)
		got := cancelled(ch)
		if len(got) != len(tc.want) {
			t.Errorf("%s → %s/%s: updates %v, want %v", tc.from, tc.to, tc.settled, got, tc.want)
			continue
		}
		for id, st := range tc.want {
			if got[id] != st {
				t.Errorf("%s → %s/%s: task %s is %s, want %s", tc.from, tc.to, tc.settled, id, got[id], st)
			}
		}
	}
	inst := &workflow.Instance{Status: workflow.StatusRunning, State: workflow.State{Variables: map[string]json.RawMessage{"x": json.RawMessage("1")}}}
	ch := SetStatus(inst, workflow.StatusCompleted, rows[:2])
	if ch.Status != workflow.StatusCompleted || string(ch.State.Variables["x"]) != "1" || len(ch.Update) != 2 {
		t.Errorf("SetStatus RUNNING → COMPLETED: %+v", ch)
	}
}
