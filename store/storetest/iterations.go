package storetest

import (
	"testing"

	"github.com/flowd/flowd/store"
)

// iterationTask is a task of iteration n (index n-1) of step.
func iterationTask(id, instance, step string, n int) *store.Task {
	tk := withID(id, newTask(instance, step, "q1", clockStart))
	tk.Iteration = n
	return tk
}

// testTasksIterations: the tasks of a foreach step's iterations are rows of
// one (instance, step) told apart by their iteration, which every write
// stores and every read returns; one row per (instance, step, iteration).
func testTasksIterations(t *testing.T, h Harness) {
	b := setup(t, h)
	eq := b.engine(t)
	now := b.clock.Now()
	// Inserted with the instance (Create) and by a later write (Apply).
	first := []*store.Task{iterationTask("t-a1", "inst", "a", 1), iterationTask("t-a2", "inst", "a", 2), withID("t-b", newTask("inst", "b", "q1", clockStart))}
	b.runningWith(t, "inst", first...)
	later := iterationTask("t-a3", "inst", "a", 3)
	b.insertTasks(t, later)
	later.Status = ""

	want := []*store.Task{stored(first[0], now), stored(first[1], now), stored(later, now), stored(first[2], now)}
	got, err := eq.TasksOfInstance(b.ctx, "inst")
	if err != nil {
		t.Fatalf("TasksOfInstance: %v", err)
	}
	assertTasks(t, "the tasks of the instance, by step and iteration", want, got)
	assertTask(t, "Task of an iteration", want[1], b.lockTask(t, eq, "t-a2"))

	for what, tasks := range map[string][]*store.Task{
		"an iteration taken":              {iterationTask("t-dup", "inst", "a", 2)},
		"a batch with an iteration twice": {iterationTask("t-x1", "inst", "c", 1), iterationTask("t-x2", "inst", "c", 1)},
		"a step's plain task taken":       {withID("t-b2", newTask("inst", "b", "q1", clockStart))},
	} {
		wantErrorIs(t, "inserting "+what, InsertTasks(b.ctx, b.s, tasks), store.ErrExists)
	}
	bad := iterationTask("t-neg", "inst", "a", -1)
	wantErrorIs(t, "inserting a negative iteration", InsertTasks(b.ctx, b.s, []*store.Task{bad}), store.ErrInvalidArgument)

	claimed, err := Claim(b.ctx, eq, []string{"q1"}, clockStart, 10)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	iterations := map[string]int{}
	for _, tk := range claimed {
		iterations[tk.ID] = tk.Iteration
	}
	if iterations["t-a1"] != 1 || iterations["t-a3"] != 3 || iterations["t-b"] != 0 || len(iterations) != 4 {
		t.Errorf("claimed tasks' iterations = %v, want t-a1 1, t-a2 2, t-a3 3, t-b 0", iterations)
	}
}
