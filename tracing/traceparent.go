package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes flowd sets on the spans of a step attempt.
const (
	AttrWorkflowID = attribute.Key("flowd.workflow_id")
	AttrStep       = attribute.Key("flowd.step")
	AttrAttempt    = attribute.Key("flowd.attempt")
)

// TracerName names the tracer of every flowd span.
const TracerName = "github.com/flowd/flowd"

// propagator is the W3C trace context, the only format flowd reads and
// writes: a traceparent header in, a traceparent string stored with a
// workflow and handed to workers.
var propagator = propagation.TraceContext{}

// Propagator returns the W3C trace-context propagator.
func Propagator() propagation.TextMapPropagator { return propagator }

// TraceParent is the W3C traceparent of the span in ctx, "" when ctx
// carries no valid span context.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceParent returns ctx carrying tp (a W3C traceparent) as its
// remote parent span: spans started from it join that trace. An empty or
// malformed tp leaves ctx as it is.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}
