package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/flowd/flowd/tracing/traceparent"
)

// Span attributes flowd sets on the spans of a step attempt.
const (
	AttrWorkflowID = attribute.Key("flowd.workflow_id")
	AttrStep       = attribute.Key("flowd.step")
	AttrAttempt    = attribute.Key("flowd.attempt")
)

// TracerName names the tracer of every flowd span.
const TracerName = "github.com/flowd/flowd"

// Propagator is traceparent.Propagator.
func Propagator() propagation.TextMapPropagator { return traceparent.Propagator() }

// TraceParent is traceparent.FromContext.
func TraceParent(ctx context.Context) string { return traceparent.FromContext(ctx) }

// WithTraceParent is traceparent.WithTraceParent.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	return traceparent.WithTraceParent(ctx, tp)
}
