package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// WrapStore returns s with a span for every transaction (WithTx: one span
// for all it does) and for every operation made outside one: "store.tx",
// "store.create", "store.claim_tasks", …, with db.system.name naming the
// backend. With a nil provider (tracing off) it returns s itself, so an
// untraced server pays nothing. The backend's notifications (store.Listener)
// stay visible through the wrapper.
func WrapStore(tp trace.TracerProvider, s store.Backend) store.Backend {
	if tp == nil {
		return s
	}
	system := s.Capabilities().Name
	if system == "postgres" {
		system = "postgresql" // the semantic conventions' name
	}
	ts := &tracedStore{Backend: s, tracer: tp.Tracer(TracerName), system: attribute.String("db.system.name", system)}
	if l, ok := s.(store.Listener); ok {
		return &listeningTracedStore{tracedStore: ts, Listener: l}
	}
	return ts
}

// listeningTracedStore keeps the backend's notifications visible to the
// engine's type check: a store that cannot Listen must not appear to.
type listeningTracedStore struct {
	*tracedStore
	store.Listener
}

// tracedStore traces the operations named below; the others pass through.
type tracedStore struct {
	store.Backend
	tracer trace.Tracer
	system attribute.KeyValue
}

// start begins the span of one store operation.
func (s *tracedStore) start(ctx context.Context, op string) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(s.system, attribute.String("db.operation.name", op)))
}

// end ends span, marking it failed with err.
func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (s *tracedStore) WithTx(ctx context.Context, iso store.Isolation, fn func(store.Querier) error) error {
	ctx, span := s.start(ctx, "tx")
	err := s.Backend.WithTx(ctx, iso, fn)
	end(span, err)
	return err
}

func (s *tracedStore) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	ctx, span := s.start(ctx, "create")
	span.SetAttributes(AttrWorkflowID.String(p.ID))
	inst, err := s.Backend.Create(ctx, p)
	end(span, err)
	return inst, err
}

func (s *tracedStore) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	ctx, span := s.start(ctx, "get")
	span.SetAttributes(AttrWorkflowID.String(id))
	inst, err := s.Backend.Get(ctx, id)
	end(span, err)
	return inst, err
}

func (s *tracedStore) List(ctx context.Context, p store.ListParams) (store.ListPage, error) {
	ctx, span := s.start(ctx, "list")
	page, err := s.Backend.List(ctx, p)
	end(span, err)
	return page, err
}

func (s *tracedStore) BatchInstances(ctx context.Context, p store.BatchReadParams) ([]store.BatchItem, error) {
	ctx, span := s.start(ctx, "batch_instances")
	items, err := s.Backend.BatchInstances(ctx, p)
	end(span, err)
	return items, err
}

func (s *tracedStore) History(ctx context.Context, id string, since int64, limit int) ([]store.HistoryEntry, error) {
	ctx, span := s.start(ctx, "history")
	span.SetAttributes(AttrWorkflowID.String(id))
	h, err := s.Backend.History(ctx, id, since, limit)
	end(span, err)
	return h, err
}

func (s *tracedStore) DeleteInstance(ctx context.Context, id string, expectedVersion *int64) error {
	ctx, span := s.start(ctx, "delete")
	span.SetAttributes(AttrWorkflowID.String(id))
	err := s.Backend.DeleteInstance(ctx, id, expectedVersion)
	end(span, err)
	return err
}

func (s *tracedStore) Apply(ctx context.Context, w *store.Write) (*workflow.Instance, error) {
	ctx, span := s.start(ctx, "apply")
	span.SetAttributes(AttrWorkflowID.String(w.ID))
	inst, err := s.Backend.Apply(ctx, w)
	end(span, err)
	return inst, err
}

func (s *tracedStore) ApplyGroup(ctx context.Context, creates []store.CreateParams, writes []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	ctx, span := s.start(ctx, "apply_group")
	span.SetAttributes(attribute.Int("flowd.creates", len(creates)), attribute.Int("flowd.writes", len(writes)), attribute.Bool("flowd.claim", claim != nil))
	created, written, err := s.Backend.ApplyGroup(ctx, creates, writes, claim)
	end(span, err)
	return created, written, err
}

func (s *tracedStore) ClaimTasks(ctx context.Context, p store.ClaimParams, decide func([]store.Claimable) ([]*store.ClaimWrite, error)) error {
	ctx, span := s.start(ctx, "claim_tasks")
	err := s.Backend.ClaimTasks(ctx, p, decide)
	end(span, err)
	return err
}

func (s *tracedStore) Task(ctx context.Context, id string) (*store.Task, error) {
	ctx, span := s.start(ctx, "task")
	t, err := s.Backend.Task(ctx, id)
	end(span, err)
	return t, err
}

func (s *tracedStore) TasksOfInstance(ctx context.Context, instanceID string, mode store.LockMode) ([]*store.Task, error) {
	ctx, span := s.start(ctx, "tasks_of_instance")
	span.SetAttributes(AttrWorkflowID.String(instanceID))
	ts, err := s.Backend.TasksOfInstance(ctx, instanceID, mode)
	end(span, err)
	return ts, err
}

func (s *tracedStore) Due(ctx context.Context, p store.DueParams) ([]store.DueItem, error) {
	ctx, span := s.start(ctx, "due")
	items, err := s.Backend.Due(ctx, p)
	end(span, err)
	return items, err
}
