package storetest

import (
	"errors"
	"maps"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// LegacySlotInstance is an instance with a concurrency key as a database
// from before the rows of slot counts holds it. The stores' migration tests
// insert these rows (in this order: the holders before the QUEUED ones of
// a key, as the guard of that release required) before migrating, compare
// the counts with LegacySlotCounts and check them with CheckLegacySlots.
type LegacySlotInstance struct {
	ID, Definition, Key string
	Limit               int
	Status              workflow.Status
}

// LegacySlots are instances in flight when the counts arrive: key d/full
// with its two slots held (one RUNNING, one PAUSED) and one QUEUED, key
// d/free with one of three held, key d/queue with none held and two
// QUEUED, and finished instances that count for nothing.
func LegacySlots() []LegacySlotInstance {
	return []LegacySlotInstance{
		{"full-r", "d", "full", 2, workflow.StatusRunning},
		{"full-p", "d", "full", 2, workflow.StatusPaused},
		{"full-done", "d", "full", 2, workflow.StatusCompleted},
		{"full-q", "d", "full", 2, workflow.StatusQueued},
		{"free-r", "d", "free", 3, workflow.StatusRunning},
		{"free-failed", "d", "free", 3, workflow.StatusFailed},
		{"queue-q1", "d", "queue", 2, workflow.StatusQueued},
		{"queue-q2", "d", "queue", 2, workflow.StatusQueued},
		{"gone-cancelled", "d", "gone", 1, workflow.StatusCancelled},
	}
}

// SlotCount is a row of slot counts: a key's holders and QUEUED instances.
type SlotCount struct{ Holders, Queued int }

// LegacySlotCounts are the rows the migration makes of LegacySlots, by
// key (a key with nothing in flight gets no row).
var LegacySlotCounts = map[string]SlotCount{
	"full":  {Holders: 2, Queued: 1},
	"free":  {Holders: 1},
	"queue": {Queued: 2},
}

// SlotRows are the rows of a query over concurrency_slots, as both
// drivers return them.
type SlotRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CheckLegacySlotCounts fails t unless rows, the key, holders and queued
// columns of the slot rows of definition d after the migration, are
// LegacySlotCounts.
func CheckLegacySlotCounts(t *testing.T, rows SlotRows) {
	t.Helper()
	got := map[string]SlotCount{}
	for rows.Next() {
		var key string
		var c SlotCount
		if err := rows.Scan(&key, &c.Holders, &c.Queued); err != nil {
			t.Fatal(err)
		}
		got[key] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, LegacySlotCounts) {
		t.Errorf("slot rows after the migration = %v, want %v", got, LegacySlotCounts)
	}
}

// CheckLegacySlots checks a store migrated over LegacySlots through its
// writes: each key refuses and admits exactly as its counts say.
func CheckLegacySlots(t *testing.T, s store.Backend) {
	t.Helper()
	ctx := t.Context()
	create := func(id, key string, limit int) error {
		_, err := s.Create(ctx, store.CreateParams{ID: id, Definition: "d", Status: workflow.StatusRunning,
			Concurrency: &store.ConcurrencySlot{Key: key, Limit: limit}})
		return err
	}
	move := func(id string, from, to workflow.Status) error {
		_, err := Transition(ctx, s, store.TransitionParams{ID: id, From: from, To: to})
		return err
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrConcurrencyLimit) {
			t.Errorf("%s: %v, want refused by the concurrency limit", what, err)
		}
	}
	// full: two holders of two slots, one QUEUED.
	refused("promotion with both slots of full held", move("full-q", workflow.StatusQueued, workflow.StatusRunning))
	must("a holder of full completes", move("full-r", workflow.StatusRunning, workflow.StatusCompleted))
	refused("a new instance of full while one waits QUEUED", create("full-new", "full", 2))
	must("promotion into the freed slot", move("full-q", workflow.StatusQueued, workflow.StatusRunning))
	must("the PAUSED holder of full is cancelled", move("full-p", workflow.StatusPaused, workflow.StatusCancelled))
	must("a new instance of full once its queue is empty", create("full-new", "full", 2))
	// free: one holder of three slots.
	must("second holder of free", create("free-2", "free", 3))
	must("third holder of free", create("free-3", "free", 3))
	refused("fourth holder of free", create("free-4", "free", 3))
	// queue: two QUEUED, no holder.
	refused("a new instance of queue while two wait QUEUED", create("queue-new", "queue", 2))
	must("first of queue cancelled", move("queue-q1", workflow.StatusQueued, workflow.StatusCancelled))
	refused("a new instance of queue while one waits QUEUED", create("queue-new", "queue", 2))
	must("second of queue starts", move("queue-q2", workflow.StatusQueued, workflow.StatusRunning))
	must("a new instance of queue once its queue is empty", create("queue-new", "queue", 2))
	refused("a third holder of queue", create("queue-3", "queue", 2))
	// gone: nothing in flight.
	must("a holder of gone", create("gone-new", "gone", 1))
}
