package store

import (
	"context"
	"errors"
	"time"

	"github.com/flowd/flowd/workflow"
)

// PruneFuncs are one backend's deletes, one per PruneKind, each given
// parameters PruneParams.Check accepted: Prune is the one place that
// checks p and picks the delete of its kind.
type PruneFuncs struct {
	Instances       func(ctx context.Context, p PruneParams) ([]string, error)
	Events          func(ctx context.Context, before time.Time, limit int) (int, error)
	IdempotencyKeys func(ctx context.Context, before time.Time, limit int) (int, error)
	Workers         func(ctx context.Context, before time.Time) (int, error)
	Bulk            func(ctx context.Context, before time.Time, limit int) (int, error)
}

// Prune checks p and runs the delete of its kind (see RetentionStore).
func (f PruneFuncs) Prune(ctx context.Context, p PruneParams) (Pruned, error) {
	p, err := p.Check()
	if err != nil {
		return Pruned{}, err
	}
	var n int
	switch p.Kind {
	case PruneInstances:
		ids, err := f.Instances(ctx, p)
		return Pruned{Count: len(ids), IDs: ids}, err
	case PruneEvents:
		n, err = f.Events(ctx, p.Before, p.Limit)
	case PruneIdempotencyKeys:
		n, err = f.IdempotencyKeys(ctx, p.Before, p.Limit)
	case PruneWorkers:
		n, err = f.Workers(ctx, p.Before)
	case PruneBulk:
		n, err = f.Bulk(ctx, p.Before, p.Limit)
	}
	return Pruned{Count: n}, err
}

// DueReads are one backend's reads behind the look-up kinds of Due (those
// that are not the sweeper's), each given parameters DueParams.Check
// accepted; Holder and Event answer ErrNotFound when they find none.
type DueReads struct {
	Queued       func(ctx context.Context, p DueParams) ([]*workflow.Instance, error)
	Holder       func(ctx context.Context, definition, key string) (*workflow.Instance, error)
	Waiters      func(ctx context.Context, queue string, limit int) ([]*Task, error)
	EventWaiters func(ctx context.Context, since, writtenBefore time.Time, limit int) ([]*Task, error)
	Event        func(ctx context.Context, queue string, since time.Time) (*Event, error)
}

// Read runs the read of checked p's kind and returns its items; ok is
// false for the sweeper's kinds, which the backend reads itself.
func (r DueReads) Read(ctx context.Context, p DueParams) (items []DueItem, ok bool, err error) {
	switch p.Kind {
	case DueQueued:
		insts, err := r.Queued(ctx, p)
		return InstanceItems(insts), true, err
	case DueHolder:
		inst, err := r.Holder(ctx, p.Definition, p.Key)
		items, err := oneItem(DueItem{Instance: inst}, err)
		return items, true, err
	case DueWaiters:
		tasks, err := r.Waiters(ctx, p.Queue, p.Limit)
		return TaskItems(tasks), true, err
	case DueEventWaiters:
		tasks, err := r.EventWaiters(ctx, p.Since, p.WrittenBefore, p.Limit)
		return TaskItems(tasks), true, err
	case DueEvent:
		e, err := r.Event(ctx, p.Queue, p.Since)
		items, err := oneItem(DueItem{Event: e}, err)
		return items, true, err
	}
	return nil, false, nil
}

// oneItem is the result of a read of at most one item: none for
// ErrNotFound.
func oneItem(it DueItem, err error) ([]DueItem, error) {
	if errors.Is(err, ErrNotFound) {
		return []DueItem{}, nil
	}
	if err != nil {
		return nil, err
	}
	return []DueItem{it}, nil
}

// CountReads are one backend's grouped counts behind Counter.CountInstances,
// each a map of group to count: instances by status, and QUEUED instances
// with a concurrency key by definition. Count is the one place that picks
// and assembles them.
type CountReads struct {
	ByStatus func(ctx context.Context) (map[string]int64, error)
	Queued   func(ctx context.Context) (map[string]int64, error)
}

// Count reads the counts p asks for.
func (r CountReads) Count(ctx context.Context, p CountParams) (InstanceCounts, error) {
	var c InstanceCounts
	if p.ByStatus {
		counts, err := r.ByStatus(ctx)
		if err != nil {
			return InstanceCounts{}, err
		}
		c.ByStatus = make(map[workflow.Status]int64, len(counts))
		for st, n := range counts {
			c.ByStatus[workflow.Status(st)] = n
		}
	}
	if p.Queued {
		counts, err := r.Queued(ctx)
		if err != nil {
			return InstanceCounts{}, err
		}
		c.Queued = counts
	}
	return c, nil
}
