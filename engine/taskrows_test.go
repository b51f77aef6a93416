package engine

import (
	"reflect"
	"testing"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
)

// The rules name task statuses and queues by value; they must be the
// store's, or a converted row would mean something else.
func TestRulesTaskValuesAreTheStores(t *testing.T) {
	pairs := [][2]string{
		{string(rules.TaskQueued), string(store.TaskQueued)}, {string(rules.TaskLeased), string(store.TaskLeased)},
		{string(rules.TaskDone), string(store.TaskDone)}, {string(rules.TaskFailed), string(store.TaskFailed)},
		{string(rules.TaskCancelled), string(store.TaskCancelled)},
		{rules.QueueSleep, store.QueueSleep}, {rules.QueueHTTP, store.QueueHTTP},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("rules %q, store %q", p[0], p[1])
		}
	}
	row := &store.Task{ID: "i", InstanceID: "w", StepID: "s", Queue: "q", Status: store.TaskLeased, Attempt: 2, MaxAttempts: 3, Lease: "l", LeaseOwner: "o", LastError: "e", Input: []byte(`1`)}
	v := taskView(row)
	back := newRow(&v)
	if !reflect.DeepEqual(back, row) {
		t.Errorf("round trip: %+v, want %+v", back, row)
	}
}
