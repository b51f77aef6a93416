package httpapi

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/flowd/flowd/tracing"
)

// withTracing makes a span of every request when Config.TracerProvider is
// set, named after the route mux matches; without one it adds nothing.
func (s *Server) withTracing(mux *http.ServeMux, next http.Handler) http.Handler {
	return tracing.HTTPHandler(s.cfg.TracerProvider, next, func(r *http.Request) string {
		_, pattern := mux.Handler(r)
		return tracing.RoutePattern(pattern)
	})
}

// injectTraceParent sends the trace of the span ctx carries, if any, as a
// traceparent header: a workflow started from within a span joins its
// trace, and a worker's reports join the workflow's.
func injectTraceParent(ctx context.Context, h http.Header) {
	tracing.Propagator().Inject(ctx, propagation.HeaderCarrier(h))
}
