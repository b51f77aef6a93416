package storetest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
)

// LegacyLeasedTask is a task of a step concurrency key as a database from
// before the LEASED counts were rows holds it: the stores' migration tests
// insert them (under a RUNNING instance "run", run_at in the past, a lease
// ending in the future) before migrating, then check the counts the
// migration made against LegacyLeasedCounts and the store with
// CheckLegacyLeased.
type LegacyLeasedTask struct {
	ID     string
	Key    string // "": none
	Limit  int
	Status store.TaskStatus
}

// LegacyLeasedTasks are two LEASED and one QUEUED task of key k (limit 2,
// so at its limit), one LEASED, one DONE and one QUEUED of key j (limit
// 3) and a LEASED task without a key.
func LegacyLeasedTasks() []LegacyLeasedTask {
	return []LegacyLeasedTask{
		{"k-l1", "k", 2, store.TaskLeased}, {"k-l2", "k", 2, store.TaskLeased}, {"k-q", "k", 2, store.TaskQueued},
		{"j-l", "j", 3, store.TaskLeased}, {"j-d", "j", 3, store.TaskDone}, {"j-q", "j", 3, store.TaskQueued},
		{"free-l", "", 0, store.TaskLeased},
	}
}

// LegacyLeasedCounts are the rows the migration makes of LegacyLeasedTasks.
func LegacyLeasedCounts() map[string]int { return map[string]int{"k": 2, "j": 1} }

// CheckLegacyLeased checks a store migrated over LegacyLeasedTasks, whose
// rows of counts are counts, through its claims and completions: k, at
// its limit, holds its queued task back until one of its leases ends,
// while j's goes.
func CheckLegacyLeased(t *testing.T, s store.Backend, counts map[string]int) {
	t.Helper()
	if !maps.Equal(counts, LegacyLeasedCounts()) {
		t.Errorf("leased counts after the migration %v, want %v", counts, LegacyLeasedCounts())
	}
	eq, ok := s.(store.TaskQuerier)
	if !ok {
		t.Fatal("the store claims no tasks")
	}
	now := time.Now()
	claim := func(what string, want ...string) {
		t.Helper()
		got := ids(claimAll(t, eq, []string{"q"}, now, 10, nil))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: claimed %v, want %v", what, got, want)
		}
	}
	claim("a claim after the migration", "j-q")
	tasks, err := eq.TasksOfInstance(t.Context(), "run")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tasks, func(tk *store.Task) bool { return tk.ID == "k-l1" })
	if i < 0 {
		t.Fatal("k-l1 is not stored")
	}
	if _, err := s.Apply(t.Context(), &store.Write{ID: "run", TasksOnly: true, Update: []store.TaskWrite{ended(tasks[i], store.TaskDone)}}); err != nil {
		t.Fatalf("completing k-l1: %v", err)
	}
	claim("a claim once a lease of k ended", "k-q")
}
