package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/tracing"
	"github.com/flowd/flowd/worker"
	"github.com/flowd/flowd/workflow"
)

// clientTrace is the traceparent a client starts its workflows with.
const clientTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

var clientTraceID = mustTraceID("0af7651916cd43dd8448eb211c80319c")

func mustTraceID(s string) trace.TraceID {
	id, err := trace.TraceIDFromHex(s)
	if err != nil {
		panic(err)
	}
	return id
}

const tracedDef = `{"name": "traced", "steps": [
	{"id": "a", "type": "task", "handler": "traced"},
	{"id": "b", "type": "task", "handler": "traced", "depends_on": ["a"]}]}`

// tracedServer starts a server on db whose spans go to an in-memory
// exporter.
func tracedServer(t *testing.T, db string, workers int, handlers map[string]engine.Handler) (*server.Server, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	// Loopback is opened for the http step that calls a local listener.
	s := start(t, server.Config{DB: db, Workers: &workers, TracerProvider: tp, OutboundAllow: outbound.Loopback}, handlers)
	if _, _, err := s.Client().PutDefinition(t.Context(), "traced", []byte(tracedDef)); err != nil {
		t.Fatal(err)
	}
	return s, exp
}

// postWorkflow starts a workflow of definition with a raw POST
// /v1/workflows carrying traceparent ("" for none).
func postWorkflow(t *testing.T, s *server.Server, definition, traceparent string) *workflow.Instance {
	t.Helper()
	body, _ := json.Marshal(httpapi.CreateWorkflowRequest{Definition: definition})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+"/v1/workflows", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var inst workflow.Instance
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/workflows: %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&inst); err != nil {
		t.Fatal(err)
	}
	return &inst
}

// waitCompleted waits until the workflow is COMPLETED.
func waitCompleted(t *testing.T, c *httpapi.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		inst, err := c.GetWorkflow(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusCompleted {
			return
		}
		if inst.Status.Terminal() || time.Now().After(deadline) {
			t.Fatalf("workflow %s is %s", id, inst.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spansNamed returns the ended spans called name.
func spansNamed(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// recordTraces is a handler that records the span context it runs in.
type recordTraces struct {
	mu   sync.Mutex
	seen map[string]trace.SpanContext // by step
}

func (r *recordTraces) handler(ctx context.Context, t worker.Task) (json.RawMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]trace.SpanContext{}
	}
	r.seen[t.Step] = trace.SpanContextFromContext(ctx)
	return json.RawMessage(`{}`), nil
}

// TestTracingInProcess: a traceparent on POST /v1/workflows becomes the
// workflow's trace: the request's span, every in-process step attempt
// (with the workflow, step and attempt as attributes) and the handlers'
// contexts are in it; requests and store operations are spans.
func TestTracingInProcess(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		rec := &recordTraces{}
		s, exp := tracedServer(t, db, 2, map[string]engine.Handler{"traced": rec.handler})
		inst := postWorkflow(t, s, "traced", clientTrace)
		waitCompleted(t, s.Client(), inst.ID)
		// An attempt's span ends once its outcome is recorded, a moment
		// after the workflow shows it: the shutdown waits for that.
		if err := s.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}

		posts := spansNamed(exp, "POST /v1/workflows")
		if len(posts) != 1 {
			t.Fatalf("%d spans POST /v1/workflows, want 1", len(posts))
		}
		post := posts[0]
		if post.SpanContext.TraceID() != clientTraceID || post.Parent.SpanID().String() != "b7ad6b7169203331" {
			t.Errorf("POST span in trace %s under %s, want trace %s under the client's span", post.SpanContext.TraceID(), post.Parent.SpanID(), clientTraceID)
		}
		if got := attr(post, "http.route").AsString(); got != "/v1/workflows" {
			t.Errorf("http.route = %q", got)
		}
		if got := attr(post, "http.response.status_code").AsInt64(); got != http.StatusCreated {
			t.Errorf("http.response.status_code = %d", got)
		}
		gets := spansNamed(exp, "GET /v1/workflows/{id}")
		if len(gets) == 0 || attr(gets[0], "http.route").AsString() != "/v1/workflows/{id}" || attr(gets[0], "http.response.status_code").AsInt64() != 200 {
			t.Errorf("GET spans %+v", gets)
		}

		attempts := spansNamed(exp, "step.attempt")
		steps := map[string]bool{}
		for _, a := range attempts {
			if attr(a, "flowd.workflow_id").AsString() != inst.ID {
				continue
			}
			step := attr(a, "flowd.step").AsString()
			steps[step] = true
			if a.SpanContext.TraceID() != clientTraceID {
				t.Errorf("attempt of %s in trace %s, want %s", step, a.SpanContext.TraceID(), clientTraceID)
			}
			if a.Parent.SpanID() != post.SpanContext.SpanID() {
				t.Errorf("attempt of %s under span %s, want the start request's %s", step, a.Parent.SpanID(), post.SpanContext.SpanID())
			}
			if got := attr(a, "flowd.attempt").AsInt64(); got != 1 {
				t.Errorf("attempt of %s: flowd.attempt = %d, want 1", step, got)
			}
			if got := attr(a, "flowd.outcome").AsString(); got != "completed" {
				t.Errorf("attempt of %s: flowd.outcome = %q", step, got)
			}
		}
		if !steps["a"] || !steps["b"] {
			t.Errorf("attempt spans of steps %v, want a and b", steps)
		}
		rec.mu.Lock()
		for _, step := range []string{"a", "b"} {
			if sc := rec.seen[step]; sc.TraceID() != clientTraceID {
				t.Errorf("handler of %s ran in trace %s, want %s", step, sc.TraceID(), clientTraceID)
			}
		}
		rec.mu.Unlock()

		// Store operations and transactions are spans; those a request
		// makes itself nest under its span (a start's write joins a group
		// commit, which the engine makes on its own).
		requests := map[trace.SpanID]bool{}
		for _, sp := range exp.GetSpans() {
			if sp.SpanKind == trace.SpanKindServer {
				requests[sp.SpanContext.SpanID()] = true
			}
		}
		var stores, underRequest int
		for _, sp := range exp.GetSpans() {
			if strings.HasPrefix(sp.Name, "store.") {
				stores++
				if requests[sp.Parent.SpanID()] {
					underRequest++
				}
				if attr(sp, "db.system.name").AsString() == "" {
					t.Errorf("store span %s without db.system.name", sp.Name)
				}
			}
		}
		if stores == 0 || underRequest == 0 {
			t.Errorf("%d store spans, %d under a request; want some of each", stores, underRequest)
		}
	})
}

// TestTracingRemoteWorker: a polled task carries the workflow's trace as
// traceparent, and the Go worker's handler context continues it.
func TestTracingRemoteWorker(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		s, exp := tracedServer(t, db, 0, nil)
		c := s.Client()
		inst := postWorkflow(t, s, "traced", clientTrace)
		task, err := c.PollTask(t.Context(), httpapi.PollRequest{Worker: "w", Handlers: []string{"traced"}})
		if err != nil || task == nil {
			t.Fatalf("poll: %v, %v", task, err)
		}
		sc := trace.SpanContextFromContext(tracing.WithTraceParent(t.Context(), task.TraceParent))
		if sc.TraceID() != clientTraceID {
			t.Fatalf("polled task's traceparent %q, want one in trace %s", task.TraceParent, clientTraceID)
		}
		delivers := spansNamed(exp, "step.deliver")
		if len(delivers) != 1 || delivers[0].SpanContext.SpanID() != sc.SpanID() ||
			attr(delivers[0], "flowd.workflow_id").AsString() != inst.ID || attr(delivers[0], "flowd.step").AsString() != "a" ||
			attr(delivers[0], "flowd.attempt").AsInt64() != 1 {
			t.Fatalf("step.deliver spans %+v, want one of step a, attempt 1, named by the traceparent", delivers)
		}
		if err := c.CompleteTask(t.Context(), task.TaskID, task.Lease, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}

		// The Go worker runs step b in the workflow's trace.
		rec := &recordTraces{}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- worker.Run(ctx, worker.Config{Client: c, Name: "w", Handlers: map[string]worker.Handler{"traced": rec.handler}, Wait: time.Second})
		}()
		waitCompleted(t, c, inst.ID)
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Request spans end once their handler returned, which the
		// shutdown waits for.
		if err := s.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		inB := rec.seen["b"]
		if inB.TraceID() != clientTraceID || !inB.IsRemote() {
			t.Errorf("the worker's handler ran in %+v, want the remote span of trace %s", inB, clientTraceID)
		}
		// The worker's report joined the trace too.
		joined := false
		for _, sp := range spansNamed(exp, "POST /v1/tasks/{task_id}/complete") {
			joined = joined || sp.SpanContext.TraceID() == clientTraceID && sp.Parent.SpanID() == inB.SpanID()
		}
		if !joined {
			t.Error("the worker's completion is not in the workflow's trace, under the delivery")
		}
	})
}

// TestTracingHTTPStep: an http step's request carries the attempt's span
// as traceparent, in the workflow's trace.
func TestTracingHTTPStep(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		got := make(chan string, 1)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case got <- r.Header.Get("traceparent"):
			default:
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer hook.Close()
		s, exp := tracedServer(t, db, 1, nil)
		def := `{"name": "hook", "steps": [{"id": "call", "type": "http", "request": {"method": "POST", "url": "` + hook.URL + `"}}]}`
		if _, _, err := s.Client().PutDefinition(t.Context(), "hook", []byte(def)); err != nil {
			t.Fatal(err)
		}
		inst := postWorkflow(t, s, "hook", clientTrace)
		waitCompleted(t, s.Client(), inst.ID)
		if err := s.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		sent := <-got
		attempts := spansNamed(exp, "step.attempt")
		if len(attempts) != 1 || attr(attempts[0], "flowd.step").AsString() != "call" {
			t.Fatalf("attempt spans %+v, want the http step's", attempts)
		}
		want := "00-" + clientTraceID.String() + "-" + attempts[0].SpanContext.SpanID().String() + "-01"
		if sent != want {
			t.Errorf("the http step sent traceparent %q, want %q", sent, want)
		}
	})
}
