package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A panicking handler answers a JSON 500 naming the request id, and the panic
// is logged with that id; the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
	h := s.withRequestID(s.withRecover(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	})))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/workflows/x", nil)
	req.Header.Set("X-Request-Id", "req-42")
	h.ServeHTTP(rec, req)
	var body ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 500 || !strings.Contains(body.Message, "req-42") {
		t.Errorf("panic answer: %d %s", rec.Code, rec.Body)
	}
	if l := logs.String(); !strings.Contains(l, "panic in handler") || !strings.Contains(l, "request_id=req-42") || !strings.Contains(l, "boom") {
		t.Errorf("panic log: %s", l)
	}
}

// Tokens never reach the logs, whatever the request carries.
func TestTokensNotLogged(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		tokens: []configuredToken{{Token: Token{Secret: "sup3r-secret", Role: RoleAdmin, Name: "ops"}, secret: []byte("sup3r-secret")}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/workflows", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	h := s.withRequestID(s.withLogging(s.withAuth(mux, mux)))
	for _, tok := range []string{"sup3r-secret", "wrong-secret"} {
		req := httptest.NewRequest("GET", "/v1/workflows", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if l := logs.String(); strings.Contains(l, "secret") || !strings.Contains(l, "status=401") || !strings.Contains(l, "status=204") {
		t.Errorf("request logs: %s", l)
	}
}

// A client that hangs up is not a server error: no 500, no ERROR line.
func TestClientGoneIsNotAnError(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/tasks/poll", nil).WithContext(ctx)
	s.fail(rec, req, fmt.Errorf("polling: %w", context.Canceled))
	if rec.Code != statusClientClosedRequest || strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "client went away") {
		t.Errorf("cancelled by the client: %d, log %q; want 499 and a debug line", rec.Code, logs.String())
	}
	// A cancellation the client did not cause is still the server's error.
	logs.Reset()
	rec = httptest.NewRecorder()
	s.fail(rec, httptest.NewRequest("POST", "/v1/tasks/poll", nil), fmt.Errorf("polling: %w", context.Canceled))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("cancelled inside the server: %d, log %q; want 500 and an error line", rec.Code, logs.String())
	}
}
