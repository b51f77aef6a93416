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
	// and locks nothing: the writes decided on what it read are guarded by
	// it (ApplyEach leaves out an instance that moved meanwhile, so two
	// batches at once never both take one instance).
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
