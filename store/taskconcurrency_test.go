package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/flowd/flowd/workflow"
)

func keyed(id, key string, limit int, status TaskStatus) *Task {
	return &Task{ID: id, Status: status, Flow: workflow.TaskFlow{ConcurrencyKey: key, ConcurrencyLimit: limit}}
}

// moved is a write of t from status from to its own status.
func moved(t *Task, from TaskStatus) TaskWrite {
	return TaskWrite{Task: t, Guard: TaskGuard{Status: from}}
}

// LeasedChanges: a task of a key counts while LEASED; what a write changes
// is summed per key, sorted by key, and a write that changes no count has
// no change at all.
func TestLeasedChanges(t *testing.T) {
	for _, tc := range []struct {
		name            string
		updates         []TaskWrite
		inserts, leases []*Task
		want            []LeasedChange
	}{
		{name: "a claim leases", leases: []*Task{keyed("a", "k", 2, TaskLeased), keyed("b", "k", 3, TaskLeased), keyed("c", "j", 1, TaskLeased)},
			want: []LeasedChange{{Key: "j", Delta: 1, Limit: 1}, {Key: "k", Delta: 2, Limit: 3}}},
		{name: "completion", updates: []TaskWrite{moved(keyed("a", "k", 2, TaskDone), TaskLeased)},
			want: []LeasedChange{{Key: "k", Delta: -1}}},
		{name: "failure", updates: []TaskWrite{moved(keyed("a", "k", 2, TaskFailed), TaskLeased)},
			want: []LeasedChange{{Key: "k", Delta: -1}}},
		{name: "retry, lease expiry or release re-queue", updates: []TaskWrite{moved(keyed("a", "k", 2, TaskQueued), TaskLeased)},
			want: []LeasedChange{{Key: "k", Delta: -1}}},
		{name: "a stop cancels leased and queued tasks", updates: []TaskWrite{
			moved(keyed("a", "k", 2, TaskCancelled), TaskLeased), moved(keyed("b", "k", 2, TaskCancelled), TaskQueued),
			moved(keyed("c", "j", 2, TaskCancelled), TaskLeased)},
			want: []LeasedChange{{Key: "j", Delta: -1}, {Key: "k", Delta: -1}}},
		{name: "a heartbeat keeps the lease", updates: []TaskWrite{moved(keyed("a", "k", 2, TaskLeased), TaskLeased)}},
		{name: "a queued task cancelled", updates: []TaskWrite{moved(keyed("a", "k", 2, TaskCancelled), TaskQueued)}},
		{name: "tasks without a key", updates: []TaskWrite{moved(keyed("a", "", 0, TaskDone), TaskLeased)},
			leases: []*Task{keyed("b", "", 0, TaskLeased)}},
		{name: "a key with an empty name counts", leases: []*Task{keyed("a", "", 1, TaskLeased)},
			want: []LeasedChange{{Key: "", Delta: 1, Limit: 1}}},
		{name: "one out, one in", updates: []TaskWrite{moved(keyed("a", "k", 2, TaskDone), TaskLeased)}, leases: []*Task{keyed("b", "k", 2, TaskLeased)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeasedChanges(tc.updates, tc.leases); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("LeasedChanges = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FlowGate: the counts and buckets as read decide; each bucket taken from
// is written with the bucket read as its guard (nil for one that was not
// there) and the time of its next token.
func TestFlowGateTakes(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	task := func(id, ck string, limit int, rk string) Claimable {
		tk := &Task{ID: id, Flow: workflow.TaskFlow{ConcurrencyKey: ck, ConcurrencyLimit: limit}}
		if rk != "" {
			tk.Flow.RateKey, tk.Flow.RatePerSecond, tk.Flow.RateBurst = rk, 2, 2
		}
		return Claimable{Task: tk}
	}
	read := RateBucket{Key: "r", Tokens: 0.5, UpdatedAt: now.Add(-time.Second)} // refilled to 2 (the burst)
	locked := []Claimable{task("a", "k", 2, "r"), task("b", "k", 2, "r"), task("c", "k", 2, ""), task("d", "", 0, "s"), task("e", "", 0, "r")}
	kept, taken, held := FlowGate(locked, map[string]int{"k": 0}, map[string]RateBucket{"r": read}, now)
	var ids []string
	for _, c := range kept {
		ids = append(ids, c.Task.ID)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b", "d"}) {
		t.Errorf("kept %v, want a, b (the key's limit and the bucket's two tokens) and d", ids)
	}
	want := []BucketTake{
		{Bucket: RateBucket{Key: "r", Tokens: 0, UpdatedAt: now, NextTokenAt: now.Add(500 * time.Millisecond)}, Read: &read},
		{Bucket: RateBucket{Key: "s", Tokens: 1, UpdatedAt: now, NextTokenAt: now}},
	}
	if !reflect.DeepEqual(taken, want) {
		t.Errorf("taken %+v, want %+v", taken, want)
	}
	if held.Concurrency != 1 || held.Rate != 1 || held.RateEmptied != 1 || !held.RateRetryAt.Equal(now.Add(500*time.Millisecond)) {
		t.Errorf("held back %+v", held)
	}
}
