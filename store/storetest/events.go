package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

var eventTests = []conformanceTest{
	{"Events_publish", testEventsPublish},
	{"Events_oldestSince", testEventsOldestSince},
	{"Events_deleteBefore", testEventsDeleteBefore},
	{"Events_queuedTasks", testEventsQueuedTasks},
	{"Events_tasksWithEvents", testEventsTasksWithEvents},
}

// PublishEvent fills in the id, the time (the store's clock) and null
// data; it refuses what it cannot store, and a taken id.
func testEventsPublish(t *testing.T, h Harness) {
	b := setup(t, h)
	e := &store.Event{Name: "paid", Key: "order-1"}
	if err := b.s.PublishEvent(b.ctx, e); err != nil {
		t.Fatal(err)
	}
	if e.ID == "" || !e.CreatedAt.Equal(store.Timestamp(clockStart)) || string(e.Data) != "null" {
		t.Errorf("published event = %+v, want an id, the store's time and null data", e)
	}
	got, err := b.oldestEvent(store.EventQueue("paid", "order-1"), clockStart.Add(-time.Hour))
	if err != nil || got.ID != e.ID || got.Name != "paid" || got.Key != "order-1" || string(got.Data) != "null" || !got.CreatedAt.Equal(e.CreatedAt) {
		t.Errorf("Due(event) = %+v, %v; want %+v", got, err, e)
	}
	withData := &store.Event{Name: "paid", Data: json.RawMessage(` {"n": 9007199254740993, "s": "\u00e9"} `)}
	if err := b.s.PublishEvent(b.ctx, withData); err != nil {
		t.Fatal(err)
	}
	got, err = b.oldestEvent(store.EventQueue("paid", ""), clockStart)
	var data struct {
		N json.Number `json:"n"`
		S string      `json:"s"`
	}
	if err != nil || got.ID != withData.ID || json.Unmarshal(got.Data, &data) != nil || data.N != "9007199254740993" || data.S != "é" {
		t.Errorf("Due(event) of the key \"\" = %+v, %v; want the event with its data as published", got, err)
	}
	for _, bad := range []*store.Event{
		{Name: ""},
		{Name: "paid", Data: json.RawMessage(`{`)},
		{Name: "paid", Key: "a\x00b"},
		{Name: "paid", Key: "\xff"},
	} {
		if err := b.s.PublishEvent(b.ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("PublishEvent(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if err := b.s.PublishEvent(b.ctx, &store.Event{ID: e.ID, Name: "other"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("PublishEvent with a taken id = %v, want ErrExists", err)
	}
}

// Due(event) takes the oldest event of the queue created at or after
// since (ties by id), and nothing of other names or keys.
func testEventsOldestSince(t *testing.T, h Harness) {
	b := setup(t, h)
	publish := func(id, name, key string) {
		t.Helper()
		if err := b.s.PublishEvent(b.ctx, &store.Event{ID: id, Name: name, Key: key, Data: json.RawMessage(`"` + id + `"`)}); err != nil {
			t.Fatal(err)
		}
	}
	publish("e1", "paid", "k")
	b.clock.Advance(time.Second)
	publish("e3", "paid", "k") // same time as e2: the smaller id first
	publish("e2", "paid", "k")
	publish("x", "paid", "k2")
	publish("y", "shipped", "k")
	// A key holding '/' stays one key.
	publish("z", "paid", "k/2")
	q := store.EventQueue("paid", "k")
	for _, c := range []struct {
		since time.Time
		want  string
	}{
		{clockStart.Add(-time.Hour), "e1"},
		{clockStart, "e1"},
		{clockStart.Add(time.Microsecond), "e2"},
		{clockStart.Add(time.Second), "e2"},
	} {
		got, err := b.oldestEvent(q, c.since)
		if err != nil || got.ID != c.want {
			t.Errorf("Due(event)(since %s) = %+v, %v; want %s", c.since, got, err, c.want)
		}
	}
	if got, err := b.oldestEvent(q, clockStart.Add(2*time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Due(event) after every event = %+v, %v; want ErrNotFound", got, err)
	}
	if got, err := b.oldestEvent(store.EventQueue("paid", "k/2"), clockStart); err != nil || got.ID != "z" || got.Key != "k/2" {
		t.Errorf("Due(event)(key k/2) = %+v, %v; want z", got, err)
	}
	if name, key, ok := store.ParseEventQueue(store.EventQueue("paid", "k/2")); !ok || name != "paid" || key != "k/2" {
		t.Errorf("ParseEventQueue = %q, %q, %v", name, key, ok)
	}
	if _, _, ok := store.ParseEventQueue(store.QueueSleep); ok {
		t.Errorf("ParseEventQueue(%q) is an event queue", store.QueueSleep)
	}
}

// Prune(events) deletes the events created before the cutoff, at most
// limit, oldest first.
func testEventsDeleteBefore(t *testing.T, h Harness) {
	b := setup(t, h)
	for i := range 5 {
		if err := b.s.PublishEvent(b.ctx, &store.Event{ID: "e" + string(rune('0'+i)), Name: "tick"}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	for _, limit := range []int{0, -1, store.MaxEventLimit + 1} {
		if _, err := b.prune(store.PruneEvents, b.clock.Now(), limit); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Prune(events)(limit %d) = %v, want ErrInvalidArgument", limit, err)
		}
	}
	cutoff := clockStart.Add(3 * time.Minute) // e0, e1, e2 are older
	if n, err := b.prune(store.PruneEvents, cutoff, 2); err != nil || n != 2 {
		t.Fatalf("Prune(events)(limit 2) = %d, %v; want 2", n, err)
	}
	if got, err := b.oldestEvent(store.EventQueue("tick", ""), clockStart); err != nil || got.ID != "e2" {
		t.Errorf("oldest event after deleting 2 = %+v, %v; want e2", got, err)
	}
	if n, err := b.prune(store.PruneEvents, cutoff, 10); err != nil || n != 1 {
		t.Errorf("Prune(events) again = %d, %v; want 1", n, err)
	}
	if got, err := b.oldestEvent(store.EventQueue("tick", ""), clockStart); err != nil || got.ID != "e3" {
		t.Errorf("oldest event after the sweep = %+v, %v; want e3", got, err)
	}
}

// eventWaiter creates a RUNNING instance with a QUEUED task in the queue
// of (name, key) for step "w".
func (b *bundle) eventWaiter(t *testing.T, id, name, key string) *store.Task {
	t.Helper()
	b.create(t, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: stepState()})
	tk := withID(id+"-w", newTask(id, "w", store.EventQueue(name, key), b.clock.Now()))
	b.insertTasks(t, tk)
	return tk
}

// Due(waiters) returns the QUEUED tasks of exactly that queue.
func testEventsQueuedTasks(t *testing.T, h Harness) {
	b := setup(t, h)
	b.eventWaiter(t, "a", "paid", "k")
	b.clock.Advance(time.Second)
	b.eventWaiter(t, "b", "paid", "k")
	b.eventWaiter(t, "c", "paid", "k2")
	done := b.eventWaiter(t, "d", "paid", "k")
	done.Status = store.TaskDone
	if err := UpdateTask(b.ctx, b.s, done, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := b.queuedTasks(store.EventQueue("paid", "k"), 10)
	if ids := taskIDs(got); err != nil || !slices.Equal(ids, []string{"a-w", "b-w"}) {
		t.Errorf("Due(waiters) = %v, %v; want [a-w b-w]", ids, err)
	}
	if got, err := b.queuedTasks(store.EventQueue("paid", "k"), 1); err != nil || len(got) != 1 || got[0].ID != "a-w" {
		t.Errorf("Due(waiters)(limit 1) = %v, %v; want [a-w]", taskIDs(got), err)
	}
	if got, err := b.queuedTasks("nothing\x00", 10); err != nil || len(got) != 0 {
		t.Errorf("Due(waiters) of an unstorable queue = %v, %v; want none", taskIDs(got), err)
	}
	if _, err := b.queuedTasks("q", 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Due(waiters)(limit 0) = %v, want ErrInvalidArgument", err)
	}
}

// Due(event waiters) returns the waiting tasks that have an event created
// since both the cutoff and their instance's creation, written before
// writtenBefore.
func testEventsTasksWithEvents(t *testing.T, h Harness) {
	b := setup(t, h)
	// "old" is published before any instance: no instance takes it.
	if err := b.s.PublishEvent(b.ctx, &store.Event{Name: "paid", Key: "old"}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	b.eventWaiter(t, "old", "paid", "old")
	b.eventWaiter(t, "match", "paid", "k")
	b.eventWaiter(t, "nothing", "paid", "none")
	b.clock.Advance(time.Second)
	if err := b.s.PublishEvent(b.ctx, &store.Event{Name: "paid", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	later := b.clock.Advance(time.Second)
	got, err := b.tasksWithEvents(clockStart, later, 10)
	if ids := taskIDs(got); err != nil || !slices.Equal(ids, []string{"match-w"}) {
		t.Errorf("Due(event waiters) = %v, %v; want [match-w]", ids, err)
	}
	// The event is older than the cutoff (expired): nothing.
	if got, err := b.tasksWithEvents(later, later, 10); err != nil || len(got) != 0 {
		t.Errorf("Due(event waiters)(since after the event) = %v, %v; want none", taskIDs(got), err)
	}
	// Written at or after writtenBefore: left to the waiter's own look-up.
	if got, err := b.tasksWithEvents(clockStart, clockStart.Add(time.Second), 10); err != nil || len(got) != 0 {
		t.Errorf("Due(event waiters)(written before the tasks) = %v, %v; want none", taskIDs(got), err)
	}
	if _, err := b.tasksWithEvents(clockStart, later, 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Due(event waiters)(limit 0) = %v, want ErrInvalidArgument", err)
	}
}
