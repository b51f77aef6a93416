package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/engine/rules"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LegacyHeldTask is an active task as a database from before the held flag
// holds it: the stores' migration tests insert LegacyHeldInstances and
// these rows (queue q, due long ago) before migrating, then check them
// with CheckLegacyHeld.
type LegacyHeldTask struct {
	ID, InstanceID, Queue string
	Status                store.TaskStatus
	// Held is the flag the migration gives it.
	Held bool
}

// LegacyHeldInstances are the instances of LegacyHeldTasks, by id.
func LegacyHeldInstances() map[string]workflow.Status {
	return map[string]workflow.Status{"run": workflow.StatusRunning, "paused": workflow.StatusPaused, "pending": workflow.StatusPending}
}

// LegacyHeldTasks: a PAUSED instance's queued and leased tasks are held,
// its sleep timer is not; a RUNNING instance's are not; a PENDING
// instance's are.
func LegacyHeldTasks() []LegacyHeldTask {
	return []LegacyHeldTask{
		{"run-q", "run", "q", store.TaskQueued, false},
		{"run-sleep", "run", store.QueueSleep, store.TaskQueued, false},
		{"paused-q", "paused", "q", store.TaskQueued, true},
		{"paused-l", "paused", "q", store.TaskLeased, true},
		{"paused-sleep", "paused", store.QueueSleep, store.TaskQueued, false},
		{"pending-q", "pending", "q", store.TaskQueued, true},
	}
}

// CheckLegacyHeld checks, through s, that every LegacyHeldTasks row has
// its flag, that a claim takes the tasks that are not held (the PAUSED
// instance's sleep timer among them, not its queued task), and that once
// the PAUSED instance is resumed, as the engine resumes it, its queued
// task is claimed (leased to ClaimOwner, like the others).
func CheckLegacyHeld(t *testing.T, s store.Querier) {
	t.Helper()
	ctx := t.Context()
	rows := map[string]*store.Task{}
	for id := range LegacyHeldInstances() {
		tasks, err := s.TasksOfInstance(ctx, id)
		if err != nil {
			t.Fatalf("tasks of %s: %v", id, err)
		}
		for _, task := range tasks {
			rows[task.ID] = task
		}
	}
	for _, want := range LegacyHeldTasks() {
		if got := rows[want.ID]; got == nil || got.Held != want.Held || got.Status != want.Status {
			t.Errorf("task %s after the migration: %+v; want %s, held %v", want.ID, got, want.Status, want.Held)
		}
	}
	queues := []string{"q", store.QueueSleep}
	now := time.Now()
	claim := func() []string {
		t.Helper()
		tasks, err := Claim(ctx, s, queues, now, 100)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		ids := make([]string, len(tasks))
		for i, task := range tasks {
			ids[i] = task.ID
		}
		slices.Sort(ids)
		return ids
	}
	if got, want := claim(), []string{"paused-sleep", "run-q", "run-sleep"}; !slices.Equal(got, want) {
		t.Errorf("claimed after the migration: %v, want %v", got, want)
	}

	// The resume, as the engine writes it: the status and the flags of the
	// instance's active rows, each guarded by the row as read.
	inst, err := s.Get(ctx, "paused")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := s.TasksOfInstance(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	read := make([]store.Task, len(tasks))
	for i, task := range tasks {
		read[i] = *task
	}
	ch := rules.SetStatus(inst, workflow.StatusRunning, read)
	ch.Hold(inst.Status, read)
	w := &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status, Status: ch.Status, State: ch.State,
		Deadline: ch.Deadline, Cause: "resume"}
	for i := range ch.Update {
		u := &ch.Update[i]
		row := rows[u.Task.ID]
		w.Update = append(w.Update, store.TaskWrite{Task: &u.Task, Guard: store.GuardOf(row)})
	}
	if _, err := s.Apply(ctx, w); err != nil {
		t.Fatalf("resume: %v", err)
	}
	// The first claim leased the others.
	if got, want := claim(), []string{"paused-q"}; !slices.Equal(got, want) {
		t.Errorf("claimed after the resume: %v, want %v", got, want)
	}
}
