package observed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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

// TestClaimSpanCountsTasks: a claim is one span, store.claim_tasks, that
// carries how many tasks it leased (flowd.tasks), none included; a
// refused claim's span is marked failed and carries no count.
func TestClaimSpanCountsTasks(t *testing.T) {
	t.Parallel()
	tp, exp := newProvider(t)
	s := observed.Wrap(openSQLite(t), tp, nil)
	ctx := t.Context()
	now := time.Now()
	if _, err := s.Create(ctx, store.CreateParams{ID: "w", Status: workflow.StatusRunning, Tasks: []*store.Task{
		{ID: "t1", InstanceID: "w", StepID: "a", Queue: "q", MaxAttempts: 1, RunAt: now},
		{ID: "t2", InstanceID: "w", StepID: "b", Queue: "q", MaxAttempts: 1, RunAt: now}}}); err != nil {
		t.Fatal(err)
	}
	eq := s.(store.TaskQuerier)
	claim := store.ClaimParams{Queues: []string{"q"}, Now: now.Add(time.Second), Limit: 10, Owner: "node", Lease: time.Minute}
	for i := range 2 {
		if _, _, err := eq.ClaimTasks(ctx, claim); err != nil {
			t.Fatalf("claim %d: %v", i+1, err)
		}
	}
	claim.Owner = ""
	if _, _, err := eq.ClaimTasks(ctx, claim); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a claim without an owner = %v, want ErrInvalidArgument", err)
	}
	var got []string
	for _, sp := range exp.GetSpans() {
		if sp.Name != "store.claim_tasks" {
			continue
		}
		n := "none"
		for _, kv := range sp.Attributes {
			if kv.Key == "flowd.tasks" {
				n = fmt.Sprint(kv.Value.AsInt64())
			}
		}
		got = append(got, n+"/"+sp.Status.Code.String())
	}
	if want := []string{"2/Unset", "0/Unset", "none/Error"}; !slices.Equal(got, want) {
		t.Errorf("claim spans (flowd.tasks/status) = %v, want %v", got, want)
	}
}
