package server_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/tracing/otlp"
)

// otlpReceiver is a local OTLP/HTTP trace receiver: it decodes every
// POST /v1/traces and keeps the names of the spans it got.
type otlpReceiver struct {
	mu       sync.Mutex
	requests int
	spans    map[string]int
	services map[string]bool
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.requests++
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				o.services[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				o.spans[sp.Name]++
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// runTracedWorkflow starts a server on db configured by the environment
// only, runs one workflow with a traceparent to its end and shuts the
// server down (which exports what is buffered); it returns the polled
// task of a second workflow, left unrun.
func runTracedWorkflow(t *testing.T, db string) *httpapi.TaskResponse {
	t.Helper()
	one := 1
	s, err := server.New(context.Background(), server.Config{DB: db, Addr: "127.0.0.1:0", Workers: &one})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := &recordTraces{}
	if err := s.Register("traced", rec.handler); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	if _, _, err := c.PutDefinition(t.Context(), "traced", []byte(tracedDef)); err != nil {
		t.Fatal(err)
	}
	const remoteDef = `{"name": "remote", "steps": [{"id": "r", "type": "task", "handler": "elsewhere"}]}`
	if _, _, err := c.PutDefinition(t.Context(), "remote", []byte(remoteDef)); err != nil {
		t.Fatal(err)
	}
	inst := postWorkflow(t, s, "traced", clientTrace)
	waitCompleted(t, c, inst.ID)
	postWorkflow(t, s, "remote", clientTrace)
	task, err := c.PollTask(t.Context(), httpapi.PollRequest{Worker: "w", Handlers: []string{"elsewhere"}, WaitSeconds: ptr(5.0)})
	if err != nil || task == nil {
		t.Fatalf("poll: %v, %v", task, err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	return task
}

func ptr[T any](v T) *T { return &v }

// TestTracingOTLPExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, flowd
// exports its spans over OTLP/HTTP, under OTEL_SERVICE_NAME; with the SDK
// disabled, it exports nothing and hands no trace to workers. Not
// parallel: it sets the process's environment.
func TestTracingOTLPExport(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "flowd.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
	} {
		t.Run(db.name, func(t *testing.T) {
			recv := &otlpReceiver{spans: map[string]int{}, services: map[string]bool{}}
			collector := httptest.NewServer(recv)
			defer collector.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
			t.Setenv("OTEL_SERVICE_NAME", "flowd-test")
			task := runTracedWorkflow(t, db.url(t))
			if task.TraceParent == "" || task.TraceParent[3:35] != clientTraceID.String() {
				t.Errorf("polled task's traceparent %q, want one in trace %s", task.TraceParent, clientTraceID)
			}
			recv.mu.Lock()
			defer recv.mu.Unlock()
			if recv.requests == 0 {
				t.Fatal("the receiver got no export")
			}
			for _, name := range []string{"POST /v1/workflows", "step.attempt", "step.deliver", "store.create", "POST /v1/tasks/poll"} {
				if recv.spans[name] == 0 {
					t.Errorf("no span %q exported; got %v", name, recv.spans)
				}
			}
			if !recv.services["flowd-test"] {
				t.Errorf("service names %v, want flowd-test", recv.services)
			}
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		_, err := server.New(context.Background(), server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Addr: "127.0.0.1:0"})
		if !errors.Is(err, otlp.ErrUnsupported) || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
			t.Fatalf("New with OTEL_EXPORTER_OTLP_PROTOCOL=grpc: %v, want an error naming it", err)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		recv := &otlpReceiver{spans: map[string]int{}, services: map[string]bool{}}
		collector := httptest.NewServer(recv)
		defer collector.Close()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
		t.Setenv("OTEL_SDK_DISABLED", "true")
		task := runTracedWorkflow(t, "sqlite:"+filepath.Join(t.TempDir(), "flowd.db"))
		if task.TraceParent != "" {
			t.Errorf("tracing off, yet the polled task carries traceparent %q", task.TraceParent)
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if recv.requests != 0 {
			t.Errorf("tracing off, yet %d exports reached the receiver: %v", recv.requests, recv.spans)
		}
	})
}
