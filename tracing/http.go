package tracing

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/internal/httpstatus"
	"github.com/flowd/flowd/tracing/traceparent"
)

// HTTPHandler returns next with a server span per request, named
// "METHOD ROUTE" (the route pattern, such as /v1/workflows/{id}, which
// keeps span names few whatever the ids), with the method, route, path
// and response status as attributes. An incoming traceparent header makes
// the span its child: the request joins the caller's trace. route gives a
// request's route pattern ("" for none). With a nil provider next is
// returned as it is.
func HTTPHandler(tp trace.TracerProvider, next http.Handler, route func(*http.Request) string) http.Handler {
	if tp == nil {
		return next
	}
	tracer := tp.Tracer(TracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := traceparent.Propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		pattern := route(r)
		name := r.Method
		if pattern != "" {
			name += " " + pattern
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
		))
		defer span.End()
		if pattern != "" {
			span.SetAttributes(attribute.String("http.route", pattern))
		}
		rec := &httpstatus.Recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		status := rec.Status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// RoutePattern is the path part of a ServeMux pattern ("POST /v1/x/{id}"
// → "/v1/x/{id}").
func RoutePattern(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		return pattern[i+1:]
	}
	return pattern
}
