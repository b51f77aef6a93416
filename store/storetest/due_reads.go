package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The look-ups of the concurrency limits and the event waits are kinds of
// Due; these helpers read them in the shapes the cases check, and fail
// with an error when an item has more or other than its kind carries.

// queuedDue is Due of store.DueQueued.
func (b *bundle) queuedDue(p store.DueParams) ([]*workflow.Instance, error) {
	items, err := b.s.Due(b.ctx, p)
	if err != nil {
		return nil, err
	}
	if p.Kind != store.DueQueued {
		return nil, fmt.Errorf("queuedDue of kind %d", p.Kind)
	}
	return dueInstances(items)
}

// oldestHolder is Due of store.DueHolder: ErrNotFound when it finds none.
func (b *bundle) oldestHolder(definition, key string) (*workflow.Instance, error) {
	items, err := b.s.Due(b.ctx, store.DueParams{Kind: store.DueHolder, Definition: definition, Key: key, Limit: 10})
	if err != nil {
		return nil, err
	}
	insts, err := dueInstances(items)
	switch {
	case err != nil:
		return nil, err
	case len(insts) == 0:
		return nil, store.NotFound("")
	case len(insts) > 1:
		return nil, fmt.Errorf("Due(holder) returned %d instances, want at most one", len(insts))
	}
	return insts[0], nil
}

// oldestEvent is Due of store.DueEvent: ErrNotFound when it finds none.
func (b *bundle) oldestEvent(queue string, since time.Time) (*store.Event, error) {
	items, err := b.s.Due(b.ctx, store.DueParams{Kind: store.DueEvent, Queue: queue, Since: since, Limit: 10})
	switch {
	case err != nil:
		return nil, err
	case len(items) == 0:
		return nil, fmt.Errorf("no event of queue %q: %w", queue, store.ErrNotFound)
	case len(items) > 1 || items[0].Event == nil || items[0].Instance != nil || items[0].Task != nil:
		return nil, fmt.Errorf("Due(event) = %+v, want one item with an event only", items)
	}
	return items[0].Event, nil
}

// queuedTasks is Due of store.DueWaiters.
func (b *bundle) queuedTasks(queue string, limit int) ([]*store.Task, error) {
	items, err := b.s.Due(b.ctx, store.DueParams{Kind: store.DueWaiters, Queue: queue, Limit: limit})
	if err != nil {
		return nil, err
	}
	return dueTasksOnly(items)
}

// tasksWithEvents is Due of store.DueEventWaiters.
func (b *bundle) tasksWithEvents(since, writtenBefore time.Time, limit int) ([]*store.Task, error) {
	items, err := b.s.Due(b.ctx, store.DueParams{Kind: store.DueEventWaiters, Since: since, WrittenBefore: writtenBefore, Limit: limit})
	if err != nil {
		return nil, err
	}
	return dueTasksOnly(items)
}

// dueInstances are the instances of items that carry an instance only.
func dueInstances(items []store.DueItem) ([]*workflow.Instance, error) {
	if items == nil {
		return nil, errors.New("due work read as nil, want a non-nil slice")
	}
	for _, it := range items {
		if it.Instance == nil || it.Task != nil || it.Event != nil {
			return nil, fmt.Errorf("due item %+v, want an instance only", it)
		}
	}
	return store.DueInstances(items), nil
}

// dueTasksOnly are the tasks of items that carry a task only.
func dueTasksOnly(items []store.DueItem) ([]*store.Task, error) {
	if items == nil {
		return nil, errors.New("due work read as nil, want a non-nil slice")
	}
	for _, it := range items {
		if it.Task == nil || it.Instance != nil || it.Event != nil {
			return nil, fmt.Errorf("due item %+v, want a task only", it)
		}
	}
	return store.DueTasks(items), nil
}
