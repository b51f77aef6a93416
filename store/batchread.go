package store

import (
	"context"
	"fmt"
	"time"

	"github.com/flowd/flowd/workflow"
)

// BatchReader reads the instances a batch changes, with their tasks, for
// the engine to decide each one's change and write it with Apply or
// ApplyGroup, guarded by what it read.
type BatchReader interface {
	// BatchInstances returns at most p.Limit instances whose status is
	// p.Status and whose updated_at is before p.UpdatedBefore (and, with
	// p.IDs, that are among them), oldest updated_at first (then id), each
	// with all its tasks (ordered by step id, then iteration). It changes
	// nothing.
	//
	// With p.Lock, inside a transaction of a store with concurrent writers
	// (PostgreSQL), it locks the instances and their task rows without
	// waiting for anyone: an instance another transaction holds is
	// skipped (FOR UPDATE SKIP LOCKED), and so is one of which another
	// transaction holds a task row (its row stays locked until the
	// transaction ends). Two transactions that read with p.Lock at once
	// never both get one instance. A store whose writers are serialised
	// (SQLite) needs no lock: nothing else writes while a transaction does.
	// ErrInvalidArgument for a limit outside 1–MaxBatchLimit or more IDs
	// than that, or an unknown status.
	BatchInstances(ctx context.Context, p BatchReadParams) ([]BatchItem, error)
}

// BatchReadParams are the inputs of BatchReader.BatchInstances.
type BatchReadParams struct {
	Status        workflow.Status
	UpdatedBefore time.Time
	// IDs, when not empty, keeps only these instances.
	IDs   []string
	Limit int // 1–MaxBatchLimit
	Lock  bool
}

// Check reports parameters BatchInstances refuses (ErrInvalidArgument).
func (p BatchReadParams) Check() error {
	if p.Limit < 1 || p.Limit > MaxBatchLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", ErrInvalidArgument, p.Limit, MaxBatchLimit)
	}
	if !p.Status.Valid() {
		return fmt.Errorf("%w: unknown status %q", ErrInvalidArgument, p.Status)
	}
	if len(p.IDs) > MaxBatchLimit {
		return fmt.Errorf("%w: %d ids, at most %d", ErrInvalidArgument, len(p.IDs), MaxBatchLimit)
	}
	return nil
}

// BatchItem is one instance BatchInstances read, with its tasks.
type BatchItem struct {
	Instance *workflow.Instance
	Tasks    []*Task
}

// GroupTasks gives each instance of items its tasks, from tasks (of those
// instances, in the order they are to keep).
func GroupTasks(items []BatchItem, tasks []*Task) {
	at := make(map[string]int, len(items))
	for i := range items {
		at[items[i].Instance.ID] = i
		items[i].Tasks = []*Task{}
	}
	for _, t := range tasks {
		if i, ok := at[t.InstanceID]; ok {
			items[i].Tasks = append(items[i].Tasks, t)
		}
	}
}
