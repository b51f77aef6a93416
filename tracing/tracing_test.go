package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/tracing"
)

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// TestHTTPHandler: a request's span joins the caller's trace, is named
// after its route and fails on a 5xx; without a provider the handler is
// returned as it is.
func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	var inner trace.SpanContext
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusBadGateway)
	})
	route := func(*http.Request) string { return "/v1/things/{id}" }
	if got := tracing.HTTPHandler(nil, h, route); reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Fatal("without a provider the handler is wrapped")
	}
	tp, exp := newProvider(t)
	req := httptest.NewRequest(http.MethodGet, "/v1/things/7", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tracing.HTTPHandler(tp, h, route).ServeHTTP(httptest.NewRecorder(), req)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	sp := spans[0]
	if sp.Name != "GET /v1/things/{id}" || sp.SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sp.Status.Code != codes.Error {
		t.Errorf("span %s in trace %s, status %v", sp.Name, sp.SpanContext.TraceID(), sp.Status)
	}
	if inner.SpanID() != sp.SpanContext.SpanID() {
		t.Error("the handler's context does not carry the request's span")
	}
}

// TestTraceParent: a span context survives the round trip through its
// traceparent; none, or a malformed one, carries nothing.
func TestTraceParent(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := tracing.WithTraceParent(t.Context(), tp)
	if got := tracing.TraceParent(ctx); got != tp {
		t.Errorf("round trip gave %q", got)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		if got := tracing.TraceParent(tracing.WithTraceParent(t.Context(), bad)); got != "" {
			t.Errorf("traceparent %q gave %q", bad, got)
		}
	}
}
