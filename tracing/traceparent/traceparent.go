// Package traceparent carries a workflow's trace as a W3C traceparent: in
// and out of a context, and on HTTP headers. It depends on the
// OpenTelemetry API only, so API clients and workers can join a workflow's
// trace without linking the server's tracing.
package traceparent

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator is the W3C trace context, the only format flowd reads and
// writes: a traceparent header in, a traceparent string stored with a
// workflow and handed to workers.
var propagator = propagation.TraceContext{}

// Propagator returns the W3C trace-context propagator.
func Propagator() propagation.TextMapPropagator { return propagator }

// FromContext is the W3C traceparent of the span in ctx, "" when ctx
// carries no valid span context.
func FromContext(ctx context.Context) string {
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

// Inject sets the traceparent header of h to the span ctx carries, if any.
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}
