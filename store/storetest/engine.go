package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The engine's part of the contract (store/tasks.go): task rows, definitions
// with revisions, deadlines, wake-ups. Until every backend implements it, the
// suite reaches it through type assertions and skips a backend that does not.

var engineInstanceTests = []conformanceTest{
	{"Instance_definitionRevisionAndDeadline", testInstanceEngineFields},
	{"Instance_engineFieldsKept", testInstanceEngineFieldsKept},
	{"ModifyState_deadline", testModifyStateDeadline},
}

var taskTests = []conformanceTest{
	{"Tasks_insertDefaults", testTasksInsertDefaults},
	{"Tasks_insertLeased", testTasksInsertLeased},
	{"Tasks_insertDuplicate", testTasksInsertDuplicate},
	{"Tasks_iterations", testTasksIterations},
	{"Tasks_notFound", testTasksNotFound},
	{"Tasks_updateRoundTrip", testTasksUpdateRoundTrip},
	{"Tasks_ofInstanceOrder", testTasksOfInstanceOrder},
	{"Tasks_claimFilters", testTasksClaimFilters},
	{"Tasks_claimConcurrent", testTasksClaimConcurrent},
}

var definitionTests = []conformanceTest{
	{"Definitions_putAndGet", testDefinitionsPutAndGet},
	{"Definitions_invalid", testDefinitionsInvalid},
	{"Definitions_list", testDefinitionsList},
	{"Definitions_concurrentPut", testDefinitionsConcurrentPut},
	{"CountByStatus", testCountByStatus},
	{"CountQueued", testCountQueued},
	{"Listen_otherStore", testListen},
	{"Engine_contextCancelled", testEngineContextCancelled},
}

// skipEngine is the reason a backend without the engine operations skips.
const skipEngine = "backend does not implement store.TaskQuerier yet"

// engine returns the bundle's store as an TaskQuerier, or skips t.
func (b *bundle) engine(t testing.TB) store.TaskQuerier {
	t.Helper()
	eq, ok := b.s.(store.TaskQuerier)
	if !ok {
		t.Skip(skipEngine)
	}
	return eq
}

// defs returns the bundle's store as a DefinitionStore, or skips t.
func (b *bundle) defs(t testing.TB) store.DefinitionStore {
	t.Helper()
	d, ok := b.s.(store.DefinitionStore)
	if !ok {
		t.Skip("backend does not implement store.DefinitionStore yet")
	}
	return d
}

// counter returns the bundle's store as a Counter, or skips t.
func (b *bundle) counter(t testing.TB) store.Counter {
	t.Helper()
	c, ok := b.s.(store.Counter)
	if !ok {
		t.Skip("backend does not implement store.Counter yet")
	}
	return c
}

// newTask returns a task for step of instance on queue, claimable from runAt,
// with an input that names the step. ID and Status are left to the store.
func newTask(instance, step, queue string, runAt time.Time) *store.Task {
	return &store.Task{
		InstanceID: instance, StepID: step, Queue: queue, MaxAttempts: 3, RunAt: runAt,
		Input: json.RawMessage(fmt.Sprintf(`{"step":%q,"n":9007199254740993}`, step)),
	}
}

// withID sets the task's id and returns it.
func withID(id string, tk *store.Task) *store.Task { tk.ID = id; return tk }

// insertTasks inserts tasks as the engine does, with Apply (one version
// of each instance, in the order of the tasks), and fails t on error.
func (b *bundle) insertTasks(t testing.TB, tasks ...*store.Task) {
	t.Helper()
	if err := InsertTasks(b.ctx, b.s, tasks); err != nil {
		t.Fatalf("inserting %d tasks: %v", len(tasks), err)
	}
}

// InsertTasks inserts tasks through q as the engine does, with one Apply
// per instance (in the order of the tasks), each a
// version that changes nothing else (cause "insert tasks").
func InsertTasks(ctx context.Context, q store.Querier, tasks []*store.Task) error {
	var order []string
	byInstance := map[string][]*store.Task{}
	for _, tk := range tasks {
		if byInstance[tk.InstanceID] == nil {
			order = append(order, tk.InstanceID)
		}
		byInstance[tk.InstanceID] = append(byInstance[tk.InstanceID], tk)
	}
	for _, id := range order {
		inst, err := q.Get(ctx, id)
		if err != nil {
			return err
		}
		_, err = q.Apply(ctx, &store.Write{ID: id, ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
			State: inst.State, Deadline: inst.Deadline, Cause: "insert tasks", Insert: byInstance[id]})
		if err != nil {
			return err
		}
	}
	return nil
}

// lockTask reads one task through eq and fails t on error.
func (b *bundle) lockTask(t testing.TB, eq store.TaskQuerier, id string) *store.Task {
	t.Helper()
	tk, err := eq.Task(b.ctx, id)
	if err != nil {
		t.Fatalf("Task(%q): %v", id, err)
	}
	return tk
}

// updateTask writes tk as the engine writes task rows alone (a TasksOnly
// Apply, guarded by the row as stored) and fails t on error.
func (b *bundle) updateTask(t testing.TB, tk *store.Task) {
	t.Helper()
	if err := UpdateTask(b.ctx, b.s, tk, b.clock.Now()); err != nil {
		t.Fatalf("updating task %q: %v", tk.ID, err)
	}
}

// UpdateTask writes tk through q as the engine writes a task row alone, with
// a TasksOnly Apply guarded by the row as stored.
func UpdateTask(ctx context.Context, q store.Querier, tk *store.Task, now time.Time) error {
	cur, err := q.Task(ctx, tk.ID)
	if err != nil {
		return err
	}
	_, err = q.Apply(ctx, &store.Write{ID: tk.InstanceID, TasksOnly: true, Now: now,
		Update: []store.TaskWrite{{Task: tk, Guard: store.GuardOf(cur)}}})
	return err
}

// lease moves task id to LEASED until until, as a claim does, and returns it.
func (b *bundle) lease(t testing.TB, eq store.TaskQuerier, id string, until time.Time) *store.Task {
	t.Helper()
	tk := b.lockTask(t, eq, id)
	tk.Status = store.TaskLeased
	tk.Attempt++
	tk.Lease = "lease-" + id
	tk.LeaseOwner = "node-1"
	tk.LeaseUntil = until
	b.updateTask(t, tk)
	return tk
}

// setTaskStatus moves task id to status and returns it.
func (b *bundle) setTaskStatus(t testing.TB, eq store.TaskQuerier, id string, status store.TaskStatus) *store.Task {
	t.Helper()
	tk := b.lockTask(t, eq, id)
	tk.Status = status
	b.updateTask(t, tk)
	return tk
}

// stored returns what the store should hold after inserting tk at now:
// defaults filled, times normalised.
func stored(tk *store.Task, now time.Time) *store.Task {
	c := *tk
	if c.Status == "" {
		c.Status = store.TaskQueued
	}
	if len(c.Input) == 0 {
		c.Input = json.RawMessage(`null`)
	}
	c.RunAt = store.Timestamp(c.RunAt)
	c.CreatedAt = store.Timestamp(now)
	c.UpdatedAt = store.Timestamp(now)
	return &c
}

// taskView is the comparable form of a task: times compared with Equal (the
// zero time only equals the zero time), JSON semantically.
type taskView struct {
	ID, InstanceID, StepID, Queue string
	Iteration                     int
	Status                        store.TaskStatus
	Attempt, MaxAttempts          int
	RunAt                         time.Time
	Lease, LeaseOwner             string
	LeaseUntil, AttemptDeadline   time.Time
	Input                         any
	LastError                     string
	CreatedAt, UpdatedAt          time.Time
}

func taskViewOf(tk *store.Task) *taskView {
	if tk == nil {
		return nil
	}
	return &taskView{
		ID: tk.ID, InstanceID: tk.InstanceID, StepID: tk.StepID, Queue: tk.Queue, Iteration: tk.Iteration,
		Status: tk.Status, Attempt: tk.Attempt, MaxAttempts: tk.MaxAttempts, RunAt: tk.RunAt,
		Lease: tk.Lease, LeaseOwner: tk.LeaseOwner, LeaseUntil: tk.LeaseUntil, AttemptDeadline: tk.AttemptDeadline,
		Input: normJSON(tk.Input), LastError: tk.LastError, CreatedAt: tk.CreatedAt, UpdatedAt: tk.UpdatedAt,
	}
}

// checkTaskTimes fails t unless every time of tk is normalised (a zero time
// is allowed for the optional ones only).
func checkTaskTimes(t testing.TB, what string, tk *store.Task) {
	t.Helper()
	checkTimeForm(t, what+": run_at", tk.RunAt)
	checkTimeForm(t, what+": created_at", tk.CreatedAt)
	checkTimeForm(t, what+": updated_at", tk.UpdatedAt)
	if !tk.LeaseUntil.IsZero() {
		checkTimeForm(t, what+": lease_until", tk.LeaseUntil)
	}
	if !tk.AttemptDeadline.IsZero() {
		checkTimeForm(t, what+": attempt_deadline", tk.AttemptDeadline)
	}
}

// assertTask fails t unless got equals want field by field.
func assertTask(t testing.TB, what string, want, got *store.Task) {
	t.Helper()
	if diff := cmp.Diff(taskViewOf(want), taskViewOf(got)); diff != "" {
		t.Errorf("%s: task mismatch (-want +got):\n%s", what, diff)
	}
	if got != nil {
		checkTaskTimes(t, what, got)
	}
}

// assertTasks fails t unless got is want, in order.
func assertTasks(t testing.TB, what string, want, got []*store.Task) {
	t.Helper()
	wv, gv := make([]*taskView, len(want)), make([]*taskView, len(got))
	for i, tk := range want {
		wv[i] = taskViewOf(tk)
	}
	for i, tk := range got {
		gv[i] = taskViewOf(tk)
		if tk != nil {
			checkTaskTimes(t, fmt.Sprintf("%s[%d]", what, i), tk)
		}
	}
	if diff := cmp.Diff(wv, gv); diff != "" {
		t.Errorf("%s: tasks mismatch (-want +got):\n%s\nwant ids %v\ngot ids  %v", what, diff, taskIDs(want), taskIDs(got))
	}
}

// taskIDs returns the ids of tasks, in order.
func taskIDs(tasks []*store.Task) []string {
	ids := make([]string, len(tasks))
	for i, tk := range tasks {
		if tk == nil {
			ids[i] = "<nil>"
			continue
		}
		ids[i] = tk.ID
	}
	return ids
}

// tasksOf returns the tasks of instance (no lock) and fails t on error.
func (b *bundle) tasksOf(t testing.TB, eq store.TaskQuerier, instance string) []*store.Task {
	t.Helper()
	tasks, err := eq.TasksOfInstance(b.ctx, instance)
	if err != nil {
		t.Fatalf("TasksOfInstance(%q): %v", instance, err)
	}
	return tasks
}

// runningWith creates a RUNNING instance id (stepState) with its first
// tasks, in one write: at version 0, as the engine starts a workflow.
func (b *bundle) runningWith(t testing.TB, id string, tasks ...*store.Task) *workflow.Instance {
	t.Helper()
	return b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepState(), Tasks: tasks})
}

// running creates a RUNNING instance with id and fails t on error.
func (b *bundle) running(t testing.TB, id string) *workflow.Instance {
	t.Helper()
	return b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepState()})
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
