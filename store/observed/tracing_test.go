package observed_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/workflow"
)

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// fakeBackend is a backend whose Get finds every id and whose Create
// fails; everything else is unused.
type fakeBackend struct {
	store.Backend
	gets int
}

var errCreate = errors.New("create failed")

func (f *fakeBackend) Capabilities() store.Capabilities { return store.Capabilities{Name: "postgres"} }
func (f *fakeBackend) Get(_ context.Context, id string) (*workflow.Instance, error) {
	f.gets++
	return &workflow.Instance{ID: id}, nil
}
func (f *fakeBackend) Create(context.Context, store.CreateParams) (*workflow.Instance, error) {
	return nil, errCreate
}

type listeningBackend struct{ *fakeBackend }

func (listeningBackend) Listen(context.Context) (<-chan struct{}, error) { return nil, nil }

// TestWrapTraces: an operation is one span of its own, marked failed with
// its error; the backend's notifications stay
// visible; without a provider the store is returned as it is.
func TestWrapTraces(t *testing.T) {
	t.Parallel()
	base := &fakeBackend{}
	if got := observed.Wrap(base, nil, nil); got != store.Backend(base) {
		t.Fatalf("Wrap(s, nil, nil) = %T, want s itself", got)
	}
	tp, exp := newProvider(t)
	s := observed.Wrap(base, tp, nil)
	if _, ok := s.(store.Listener); ok {
		t.Error("a store that cannot Listen appears to through the wrapper")
	}
	if _, ok := observed.Wrap(listeningBackend{base}, tp, nil).(store.Listener); !ok {
		t.Error("the wrapper hides the backend's Listen")
	}
	if _, err := s.Get(t.Context(), "w"); err != nil || base.gets != 1 {
		t.Fatalf("Get = %v after %d reads", err, base.gets)
	}
	if _, err := s.Create(t.Context(), store.CreateParams{ID: "w"}); !errors.Is(err, errCreate) {
		t.Fatalf("Create = %v, want the backend's error", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "store.get" || spans[1].Name != "store.create" {
		t.Fatalf("spans %v, want store.get and store.create", spans.Snapshots())
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
