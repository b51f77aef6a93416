package worker

import (
	"context"

	"github.com/flowd/flowd/tracing/traceparent"
)

// continueTrace is ctx carrying the polled task's trace (its W3C
// traceparent) as the remote parent span: spans a handler starts from its
// context, with whatever tracer provider the program installed, nest under
// the attempt's delivery in the workflow's trace. A task without one
// leaves ctx as it is.
func continueTrace(ctx context.Context, traceParent string) context.Context {
	return traceparent.WithTraceParent(ctx, traceParent)
}
