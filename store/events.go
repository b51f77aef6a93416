package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/workflow"
)

// EventQueuePrefix, EventQueue and ParseEventQueue name the queues of the
// tasks waiting for events (see workflow.EventQueue).
const EventQueuePrefix = workflow.EventQueuePrefix

// EventQueue is workflow.EventQueue.
func EventQueue(name, key string) string { return workflow.EventQueue(name, key) }

// ParseEventQueue is workflow.ParseEventQueue.
func ParseEventQueue(queue string) (name, key string, ok bool) {
	return workflow.ParseEventQueue(queue)
}

// Event is one published event, as stored.
type Event struct {
	ID   string
	Name string
	Key  string
	// Data is any JSON (null when the publisher gave none).
	Data      json.RawMessage
	CreatedAt time.Time
}

// Queue is the queue of the tasks e completes.
func (e *Event) Queue() string { return EventQueue(e.Name, e.Key) }

// MaxEventLimit bounds the limits of EventStore's reads and of the
// PruneEvents kind of RetentionStore.Prune.
const MaxEventLimit = 10000

// EventStore stores published events. An event completes the wait steps
// waiting for it when it is published, and those that start waiting later
// while it is kept (the engine's event retention), so both sides look each
// other up: the waiters of an event and the event of a waiter are the
// kinds DueWaiters, DueEventWaiters and DueEvent of TaskQuerier.Due; the
// expired events are deleted by RetentionStore.Prune.
type EventStore interface {
	// PublishEvent stores e and fills in its ID (a new UUIDv7 when empty)
	// and CreatedAt (the store's clock). A Data of nil is stored as null.
	// Errors: ErrInvalidArgument (no name, or data that is not JSON);
	// ErrExists (the id is taken).
	PublishEvent(ctx context.Context, e *Event) error
}

// CheckEvent reports an event PublishEvent refuses and fills in its
// defaults: a new id, null data.
func CheckEvent(e *Event) error {
	if e.Name == "" {
		return fmt.Errorf("%w: an event needs a name", ErrInvalidArgument)
	}
	if !utf8.ValidString(e.Key) || strings.ContainsRune(e.Key, 0) {
		// PostgreSQL text cannot hold them; refused on every store alike.
		return fmt.Errorf("%w: the key of event %q is not valid UTF-8 or contains NUL", ErrInvalidArgument, e.Name)
	}
	if e.ID == "" {
		e.ID = NewID()
	}
	if len(e.Data) == 0 {
		e.Data = json.RawMessage("null")
	}
	if !json.Valid(e.Data) {
		return fmt.Errorf("%w: the data of event %q is not JSON", ErrInvalidArgument, e.Name)
	}
	return nil
}

// CheckEventLimit reports a limit outside 1–MaxEventLimit.
func CheckEventLimit(limit int) error {
	if limit < 1 || limit > MaxEventLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, limit, MaxEventLimit)
	}
	return nil
}
