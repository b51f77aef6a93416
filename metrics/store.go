package metrics

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// InstrumentStore returns s with every write recorded in
// flowd_state_updates_total and flowd_update_duration_seconds, including writes
// made inside WithTx.
func (m *Metrics) InstrumentStore(s store.Backend) store.Backend {
	is := &instrumentedStore{instrumentedQuerier: instrumentedQuerier{Querier: s, m: m}, base: s}
	if l, ok := s.(store.Listener); ok {
		return &listeningStore{instrumentedStore: is, Listener: l}
	}
	return is
}

// listeningStore keeps the backend's notifications visible to the engine's
// type check: a store that cannot Listen must not appear to.
type listeningStore struct {
	*instrumentedStore
	store.Listener
}

// instrumentedStore takes the Querier methods from instrumentedQuerier and
// passes the rest of store.Backend through.
type instrumentedStore struct {
	instrumentedQuerier
	base store.Backend
}

func (s *instrumentedStore) WithTx(ctx context.Context, iso store.Isolation, fn func(store.Querier) error) error {
	w := &txWrites{}
	err := s.base.WithTx(ctx, iso, func(tx store.Querier) error {
		return fn(instrumentedQuerier{Querier: tx, m: s.m, tx: w})
	})
	s.noteWrite(err, w.wrote.Load())
	if err == nil {
		s.m.WorkflowsDeleted.Add(float64(w.deleted.Load()))
	}
	return err
}

func (s *instrumentedStore) Migrate(ctx context.Context) (store.MigrationReport, error) {
	return s.base.Migrate(ctx)
}
func (s *instrumentedStore) PutDefinition(ctx context.Context, name string, spec json.RawMessage) (int, bool, error) {
	rev, created, err := s.base.PutDefinition(ctx, name, spec)
	s.noteWrite(err, created)
	return rev, created, err
}

func (s *instrumentedStore) DeleteDefinition(ctx context.Context, name string) error {
	err := s.base.DeleteDefinition(ctx, name)
	s.noteWrite(err, true)
	return err
}

func (s *instrumentedStore) ListDefinitions(ctx context.Context, p store.ListDefinitionsParams) ([]*store.DefinitionRecord, error) {
	return s.base.ListDefinitions(ctx, p)
}

func (s *instrumentedStore) CountInstances(ctx context.Context, p store.CountParams) (store.InstanceCounts, error) {
	return s.base.CountInstances(ctx, p)
}

func (s *instrumentedStore) Capabilities() store.Capabilities { return s.base.Capabilities() }
func (s *instrumentedStore) Ping(ctx context.Context) error   { return s.base.Ping(ctx) }
func (s *instrumentedStore) Close() error                     { return s.base.Close() }

// instrumentedQuerier records the writes of a Querier; reads pass through.
type instrumentedQuerier struct {
	store.Querier
	m  *Metrics
	tx *txWrites // nil outside WithTx
}

func (q instrumentedQuerier) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	start := time.Now()
	inst, err := q.Querier.Create(ctx, p)
	q.observe("create", start, err, true)
	return inst, err
}

func (q instrumentedQuerier) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	start := time.Now()
	inst, err := q.Querier.Apply(ctx, w)
	q.observe("apply", start, err, true)
	return inst, err
}

func (q instrumentedQuerier) DeleteInstance(ctx context.Context, id string, expectedVersion *int64) error {
	start := time.Now()
	err := q.Querier.DeleteInstance(ctx, id, expectedVersion)
	q.observe("delete", start, err, true)
	if err == nil {
		q.deleted(1)
	}
	return err
}

// deleted counts n instances deleted: at once outside a transaction, at
// its commit inside one (a rolled-back delete deleted nothing).
func (q instrumentedQuerier) deleted(n int) {
	if q.tx != nil {
		q.tx.deleted.Add(int64(n))
		return
	}
	q.m.WorkflowsDeleted.Add(float64(n))
}

func (q instrumentedQuerier) ApplyGroup(ctx context.Context, creates []store.CreateParams, writes []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	start := time.Now()
	var (
		claimWrites []*store.ClaimWrite
		decided     bool
	)
	if claim != nil && claim.Decide != nil {
		decide := claim.Decide
		claim = &store.GroupClaim{Params: claim.Params, Decide: func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
			var err error
			decided = true
			claimWrites, err = decide(locked)
			return claimWrites, err
		}}
	}
	created, written, err := q.Querier.ApplyGroup(ctx, creates, writes, claim)
	q.noteWrite(err, len(creates)+len(writes)+writtenStates(claimWrites) > 0)
	// Every write of the group counts under its own op (the claim of a
	// failed group once, if it got as far as deciding); the duration is
	// the group's, observed once for each op in it.
	claimed := writtenStates(claimWrites)
	if err != nil && decided {
		claimed = 1
	}
	for _, g := range []struct {
		op string
		n  int
	}{{"create", len(creates)}, {"apply", len(writes)}, {"claim", claimed}} {
		if g.n > 0 {
			q.m.StateUpdates.WithLabelValues(g.op, Result(err)).Add(float64(g.n))
			q.m.UpdateDuration.WithLabelValues(g.op).Observe(time.Since(start).Seconds())
		}
	}
	return created, written, err
}

func (q instrumentedQuerier) ClaimTasks(ctx context.Context, p store.ClaimParams, decide func([]store.Claimable) ([]*store.ClaimWrite, error)) error {
	start := time.Now()
	var writes []*store.ClaimWrite
	err := q.Querier.ClaimTasks(ctx, p, func(locked []store.Claimable) ([]*store.ClaimWrite, error) {
		var err error
		writes, err = decide(locked)
		return writes, err
	})
	// Every instance written counts; the duration is the claim's, observed
	// once, when it wrote or failed.
	n := writtenStates(writes)
	q.noteWrite(err, n > 0)
	switch {
	case err != nil:
		q.m.StateUpdates.WithLabelValues("claim", Result(err)).Inc()
	case n > 0:
		q.m.StateUpdates.WithLabelValues("claim", Result(nil)).Add(float64(n))
	default:
		return nil
	}
	q.m.UpdateDuration.WithLabelValues("claim").Observe(time.Since(start).Seconds())
	return err
}

// writtenStates counts the claim writes that wrote an instance.
func writtenStates(writes []*store.ClaimWrite) int {
	n := 0
	for _, w := range writes {
		if w != nil && w.Written && w.SetState {
			n++
		}
	}
	return n
}

func (s *instrumentedStore) RecordWorker(ctx context.Context, w store.WorkerRecord) error {
	err := s.base.RecordWorker(ctx, w)
	s.noteWrite(err, true)
	return err
}

func (s *instrumentedStore) ListWorkers(ctx context.Context, since time.Time) ([]store.WorkerRecord, error) {
	return s.base.ListWorkers(ctx, since)
}

// Prune counts the instances it deletes (flowd_workflows_deleted_total);
// its deletes of instances and worker records are writes, as the other
// writes of those tables, for StorageFull. The deletes of events and
// idempotency keys pass through without counting, as their writes do.
func (s *instrumentedStore) Prune(ctx context.Context, p store.PruneParams) (store.Pruned, error) {
	pruned, err := s.base.Prune(ctx, p)
	switch p.Kind {
	case store.PruneInstances:
		s.noteWrite(err, pruned.Count > 0)
		s.deleted(len(pruned.IDs))
	case store.PruneWorkers:
		s.noteWrite(err, pruned.Count > 0)
	}
	return pruned, err
}

// The event store's writes are not instance writes: they pass through
// without counting as state updates.
func (s *instrumentedStore) PublishEvent(ctx context.Context, e *store.Event) error {
	return s.base.PublishEvent(ctx, e)
}
