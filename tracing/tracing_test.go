package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/tracing"
	"github.com/flowd/flowd/workflow"
)

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// fakeBackend is a backend whose transactions run fn and whose Create
// fails; everything else is unused.
type fakeBackend struct {
	store.Backend
	txs int
}

var errCreate = errors.New("create failed")

func (f *fakeBackend) Capabilities() store.Capabilities { return store.Capabilities{Name: "postgres"} }
func (f *fakeBackend) WithTx(ctx context.Context, _ store.Isolation, fn func(store.Querier) error) error {
	f.txs++
	return fn(nil)
}
func (f *fakeBackend) Create(context.Context, store.CreateParams) (*workflow.Instance, error) {
	return nil, errCreate
}

type listeningBackend struct{ *fakeBackend }

func (listeningBackend) Listen(context.Context) (<-chan struct{}, error) { return nil, nil }

// TestWrapStore: a transaction is one span "store.tx", an operation one of
// its own, marked failed with its error; the backend's notifications stay
// visible; without a provider the store is returned as it is.
func TestWrapStore(t *testing.T) {
	t.Parallel()
	base := &fakeBackend{}
	if got := tracing.WrapStore(nil, base); got != store.Backend(base) {
		t.Fatalf("WrapStore(nil, s) = %T, want s itself", got)
	}
	tp, exp := newProvider(t)
	s := tracing.WrapStore(tp, base)
	if _, ok := s.(store.Listener); ok {
		t.Error("a store that cannot Listen appears to through the wrapper")
	}
	if _, ok := tracing.WrapStore(tp, listeningBackend{base}).(store.Listener); !ok {
		t.Error("the wrapper hides the backend's Listen")
	}
	if err := s.WithTx(t.Context(), store.Serializable, func(store.Querier) error { return nil }); err != nil || base.txs != 1 {
		t.Fatalf("WithTx = %v after %d transactions", err, base.txs)
	}
	if _, err := s.Create(t.Context(), store.CreateParams{ID: "w"}); !errors.Is(err, errCreate) {
		t.Fatalf("Create = %v, want the backend's error", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "store.tx" || spans[1].Name != "store.create" {
		t.Fatalf("spans %v, want store.tx and store.create", spans.Snapshots())
	}
	for _, sp := range spans {
		if sp.SpanKind != trace.SpanKindClient {
			t.Errorf("%s is a %s span", sp.Name, sp.SpanKind)
		}
		found := false
		for _, kv := range sp.Attributes {
			found = found || kv.Key == "db.system.name" && kv.Value.AsString() == "postgresql"
		}
		if !found {
			t.Errorf("%s: attributes %v, want db.system.name postgresql", sp.Name, sp.Attributes)
		}
	}
	if spans[0].Status.Code != codes.Unset || spans[1].Status.Code != codes.Error {
		t.Errorf("statuses %v, %v; want the failed create's only an error", spans[0].Status, spans[1].Status)
	}
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
