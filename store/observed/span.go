package observed

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/tracing"
)

// start begins the span of one store operation: nil when there is none
// (tracing off, or inside a transaction, whose span covers it), so an
// untraced operation sets no attribute at all.
func (q querier) start(ctx context.Context, op string) (context.Context, trace.Span) {
	if q.o.tracer == nil {
		return ctx, nil
	}
	return q.o.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(q.o.system, attribute.String("db.operation.name", op)))
}

// withID names the workflow a traced operation is about.
func withID(span trace.Span, id string) {
	if span != nil {
		span.SetAttributes(tracing.AttrWorkflowID.String(id))
	}
}

// end ends span, marking it failed with err.
func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
