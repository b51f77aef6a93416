package engine

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/tracing"
)

// Spans of step attempts. Every attempt joins the trace its workflow was
// started in (Task.TraceParent, stored with the instance), whichever node
// runs it and however long after the start. With tracing off (no tracer)
// nothing here allocates or records anything.

// traceParentOf is the traceparent a workflow started with ctx keeps: that
// of the span ctx carries (the request that started it), "" when tracing
// is off.
func (e *Engine) traceParentOf(ctx context.Context) string {
	if e.tracer == nil {
		return ""
	}
	return tracing.TraceParent(ctx)
}

// attemptAttributes are the attributes of every span of t's attempt.
func attemptAttributes(t *Task) trace.SpanStartOption {
	return trace.WithAttributes(
		tracing.AttrWorkflowID.String(t.WorkflowID),
		tracing.AttrStep.String(t.Step),
		tracing.AttrAttempt.Int(t.Attempt),
		attribute.String("flowd.handler", t.Handler),
	)
}

// attemptContext is ctx with t's workflow trace as the parent of the spans
// started from it; a workflow without one gets a trace of its own rather
// than joining whatever ctx carried.
func attemptContext(ctx context.Context, t *Task) (context.Context, trace.SpanStartOption) {
	if t.TraceParent == "" {
		return ctx, trace.WithNewRoot()
	}
	return tracing.WithTraceParent(ctx, t.TraceParent), nil
}

// startAttempt starts the span "step.attempt" of an in-process attempt of
// t: from its delivery to its recorded outcome (endAttempt). Timers are
// not attempts of any work and get none; nor does anything with tracing
// off (nil span).
func (e *Engine) startAttempt(ctx context.Context, t Task) (context.Context, trace.Span) {
	if e.tracer == nil || t.Handler == store.QueueSleep || t.Handler == store.QueueTick {
		return ctx, nil
	}
	pctx, root := attemptContext(ctx, &t)
	opts := []trace.SpanStartOption{attemptAttributes(&t)}
	if root != nil {
		opts = append(opts, root)
	}
	return e.tracer.Start(pctx, "step.attempt", opts...)
}

// endAttempt ends span (nil: nothing) with the attempt's outcome: the
// handler's error fails it; released says the handler was stopped by a
// shutdown and its task given back; recordErr is a failure to record the
// outcome.
func endAttempt(span trace.Span, handlerErr, recordErr error, released bool) {
	if span == nil {
		return
	}
	outcome := "completed"
	switch {
	case released:
		outcome = "released"
	case handlerErr != nil:
		outcome = "failed"
		span.RecordError(handlerErr)
		span.SetStatus(codes.Error, handlerErr.Error())
	}
	if recordErr != nil {
		span.RecordError(recordErr)
		if handlerErr == nil {
			span.SetStatus(codes.Error, "recording the outcome: "+recordErr.Error())
		}
	}
	span.SetAttributes(attribute.String("flowd.outcome", outcome))
	span.End()
}

// injectTrace sends the attempt's trace with an http step's request (a
// traceparent header, replacing one the step set), so that the service
// called continues it; with tracing off it sends nothing.
func (e *Engine) injectTrace(ctx context.Context, h http.Header) {
	if e.tracer != nil {
		tracing.Propagator().Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// traceDelivery records the delivery of t to a remote worker as the span
// "step.deliver" in the workflow's trace, and hands the worker that span
// as t.TraceParent: the worker's own spans of the attempt nest under it.
func (e *Engine) traceDelivery(ctx context.Context, t *Task) {
	if e.tracer == nil {
		return
	}
	pctx, root := attemptContext(ctx, t)
	opts := []trace.SpanStartOption{attemptAttributes(t), trace.WithSpanKind(trace.SpanKindProducer)}
	if root != nil {
		opts = append(opts, root)
	}
	sctx, span := e.tracer.Start(pctx, "step.deliver", opts...)
	span.End()
	t.TraceParent = tracing.TraceParent(sctx)
}
