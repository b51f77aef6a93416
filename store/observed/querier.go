package observed

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// querier observes the Querier operations of the backend: each is a span
// and its writes count at once.
type querier struct {
	q store.Querier
	o *observer
}

func (q querier) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	start := time.Now()
	ctx, span := q.start(ctx, "create")
	withID(span, p.ID)
	inst, err := q.q.Create(ctx, p)
	end(span, err)
	q.observe("create", start, err, true)
	return inst, err
}

func (q querier) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	ctx, span := q.start(ctx, "get")
	withID(span, id)
	inst, err := q.q.Get(ctx, id)
	end(span, err)
	return inst, err
}

func (q querier) GetWithAttemptsInFlight(ctx context.Context, id string) (*workflow.Instance, error) {
	ctx, span := q.start(ctx, "get")
	withID(span, id)
	inst, err := q.q.GetWithAttemptsInFlight(ctx, id)
	end(span, err)
	return inst, err
}

func (q querier) List(ctx context.Context, p store.ListParams) (store.ListPage, error) {
	ctx, span := q.start(ctx, "list")
	page, err := q.q.List(ctx, p)
	end(span, err)
	return page, err
}

func (q querier) BatchInstances(ctx context.Context, p store.BatchReadParams) ([]store.BatchItem, error) {
	ctx, span := q.start(ctx, "batch_instances")
	items, err := q.q.BatchInstances(ctx, p)
	end(span, err)
	return items, err
}

func (q querier) History(ctx context.Context, id string, since int64, limit int) ([]store.HistoryEntry, error) {
	ctx, span := q.start(ctx, "history")
	withID(span, id)
	h, err := q.q.History(ctx, id, since, limit)
	end(span, err)
	return h, err
}

func (q querier) DeleteInstance(ctx context.Context, id string, expectedVersion *int64) error {
	start := time.Now()
	ctx, span := q.start(ctx, "delete")
	withID(span, id)
	err := q.q.DeleteInstance(ctx, id, expectedVersion)
	end(span, err)
	q.observe("delete", start, err, true)
	if err == nil {
		q.deleted(1)
	}
	return err
}

func (q querier) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	start := time.Now()
	ctx, span := q.start(ctx, "apply")
	withID(span, w.ID)
	inst, err := q.q.Apply(ctx, w)
	end(span, err)
	q.observe("apply", start, err, true)
	return inst, err
}

// ApplyEach counts each write made under apply (a missed one writes
// nothing and counts nowhere; a failed call counts once).
func (q querier) ApplyEach(ctx context.Context, writes []*store.Write) ([]*workflow.Instance, error) {
	start := time.Now()
	ctx, span := q.start(ctx, "apply_each")
	written, err := q.q.ApplyEach(ctx, writes)
	end(span, err)
	n := 0
	for _, inst := range written {
		if inst != nil {
			n++
		}
	}
	q.noteWrite(err, n > 0)
	if q.o.m != nil && (err != nil || n > 0) {
		if err != nil {
			n = 1
		}
		q.o.m.StateUpdates.WithLabelValues("apply", metrics.Result(err)).Add(float64(n))
		q.o.m.UpdateDuration.WithLabelValues("apply").Observe(time.Since(start).Seconds())
	}
	return written, err
}

func (q querier) ApplyGroup(ctx context.Context, creates []store.CreateParams, writes []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	start := time.Now()
	ctx, span := q.start(ctx, "apply_group")
	if span != nil {
		span.SetAttributes(attribute.Int("flowd.creates", len(creates)), attribute.Int("flowd.writes", len(writes)), attribute.Bool("flowd.claim", claim != nil))
	}
	created, written, err := q.q.ApplyGroup(ctx, creates, writes, claim)
	end(span, err)
	leased := 0
	if claim != nil && err == nil {
		leased = len(claim.Claimed)
	}
	q.observeGroup(start, err, len(creates), len(writes), leased)
	return created, written, err
}

func (q querier) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	ctx, span := q.start(ctx, "claim_tasks")
	claimed, held, err := q.q.ClaimTasks(ctx, p)
	if span != nil && err == nil {
		span.SetAttributes(attribute.Int("flowd.tasks", len(claimed)))
	}
	end(span, err)
	// A claim writes task rows, no instance: it counts for the storage
	// gauge, not among the state updates.
	q.noteWrite(err, len(claimed) > 0)
	return claimed, held, err
}

func (q querier) Task(ctx context.Context, id string) (*store.Task, error) {
	ctx, span := q.start(ctx, "task")
	t, err := q.q.Task(ctx, id)
	end(span, err)
	return t, err
}

func (q querier) TasksOfInstance(ctx context.Context, instanceID string) ([]*store.Task, error) {
	ctx, span := q.start(ctx, "tasks_of_instance")
	withID(span, instanceID)
	ts, err := q.q.TasksOfInstance(ctx, instanceID)
	end(span, err)
	return ts, err
}

func (q querier) Due(ctx context.Context, p store.DueParams) ([]store.DueItem, error) {
	ctx, span := q.start(ctx, "due")
	items, err := q.q.Due(ctx, p)
	end(span, err)
	return items, err
}
