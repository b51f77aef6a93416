package observed

import (
	"context"
	"encoding/json"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Prune counts the instances it deletes (flowd_workflows_deleted_total);
// its deletes of instances and worker records are writes, as the other
// writes of those tables, for StorageFull. The deletes of events and
// idempotency keys pass without counting, as their writes do.
func (b *backend) Prune(ctx context.Context, p store.PruneParams) (store.Pruned, error) {
	pruned, err := b.Backend.Prune(ctx, p)
	switch p.Kind {
	case store.PruneInstances:
		b.noteWrite(err, pruned.Count > 0)
		b.deleted(len(pruned.IDs))
	case store.PruneWorkers:
		b.noteWrite(err, pruned.Count > 0)
	}
	return pruned, err
}

// The writes of definitions and of the worker registry are writes for
// StorageFull, not state updates. The event and schedule stores' other
// writes pass through without counting.

func (b *backend) PutDefinition(ctx context.Context, name string, spec json.RawMessage) (int, bool, error) {
	rev, created, err := b.Backend.PutDefinition(ctx, name, spec)
	b.noteWrite(err, created)
	return rev, created, err
}

func (b *backend) DeleteDefinition(ctx context.Context, name string) error {
	err := b.Backend.DeleteDefinition(ctx, name)
	b.noteWrite(err, true)
	return err
}

func (b *backend) RecordWorker(ctx context.Context, w store.WorkerRecord) error {
	err := b.Backend.RecordWorker(ctx, w)
	b.noteWrite(err, true)
	return err
}

// FireSchedule: a fire that created its instance counts as a create of
// flowd_state_updates_total.
func (b *backend) FireSchedule(ctx context.Context, f store.ScheduleFire) (*workflow.Instance, error) {
	inst, err := b.Backend.FireSchedule(ctx, f)
	b.noteWrite(err, inst != nil)
	if b.o.m != nil && f.Start != nil && (err != nil || inst != nil) {
		b.o.m.StateUpdates.WithLabelValues("create", metrics.Result(err)).Inc()
	}
	return inst, err
}

// StorageFull reports whether the last write that settled it failed with
// store.ErrStorageFull: no write has stored anything since. /healthz
// answers 503 while it holds.
func (b *backend) StorageFull() bool { return b.o.m != nil && b.o.m.StorageFull() }

// PutBulk: a bulk operation's record is a write for StorageFull; the
// writes of its instances are counted as the writes they are.
func (b *backend) PutBulk(ctx context.Context, op *store.BulkOperation, expectedVersion int64) (*store.BulkOperation, error) {
	out, err := b.Backend.PutBulk(ctx, op, expectedVersion)
	b.noteWrite(err, out != nil)
	return out, err
}
