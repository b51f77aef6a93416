package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/internal/httpstatus"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/workflow"
)

// Config holds what the API needs; zero values get sensible defaults.
type Config struct {
	Store store.Backend
	// Engine runs definition-based workflows; nil gets an engine without
	// workers over Store (the API then still starts and advances instances,
	// but runs no steps itself).
	Engine *engine.Engine
	Logger *slog.Logger
	// Tokens, when not empty, are the bearer tokens the /v1 routes require,
	// each with its role (routeAccess says which routes a role may use)
	// and its name, the actor of the writes made with it. Without tokens
	// every request may do everything, as store.ActorAnonymous.
	Tokens []Token
	// MetricsTokenRequired makes /metrics need a token (of any role) too.
	MetricsTokenRequired bool
	// Registry is served at /metrics; nil serves an empty registry.
	Registry *prometheus.Registry
	// RequestTimeout bounds every handler (default 30s).
	RequestTimeout time.Duration
	// ListenAddr is the address the server listens on, host:port with the
	// port resolved: a request whose Host is exactly this is answered.
	// Unspecified addresses (0.0.0.0, [::]) name no host and are ignored.
	ListenAddr string
	// AllowedHosts are the other Host values answered besides loopback
	// names and ListenAddr: "host" (any port) or "host:port"; AnyHost
	// answers every Host. Other requests get 421.
	AllowedHosts []string
	// MaxPageBytes bounds the encoded rows of one page of GET /v1/workflows
	// and GET /v1/workflows/{id}/history (default DefaultMaxPageBytes): a
	// page ends early, with its continuation, once its rows reach it.
	MaxPageBytes int
	// TracerProvider, when not nil, makes a span of every request
	// (tracing.HTTPHandler); nil traces nothing.
	TracerProvider trace.TracerProvider
}

// Server is the http.Handler of the flowd API.
type Server struct {
	cfg     Config
	eng     *engine.Engine
	log     *slog.Logger
	handler http.Handler
	tokens  []configuredToken

	// What the Host check answers besides loopback names.
	allowedHosts           []hostRule
	anyHost                bool
	listenHost, listenPort string

	// The API description as JSON (GET /v1/openapi.json).
	openAPI []byte
}

// router is what routes registers on: an *http.ServeMux, or in tests a
// recorder of the patterns.
type router interface {
	Handle(pattern string, handler http.Handler)
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// NewServer builds the API handler over cfg.Store.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MaxPageBytes <= 0 {
		cfg.MaxPageBytes = DefaultMaxPageBytes
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Engine == nil {
		none := 0
		e, err := engine.New(engine.Config{Store: cfg.Store, Logger: cfg.Logger, Workers: &none})
		if err != nil {
			return nil, err
		}
		cfg.Engine = e
	}
	s := &Server{cfg: cfg, log: cfg.Logger, eng: cfg.Engine}
	if err := checkTokens(cfg.Tokens); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if cfg.MetricsTokenRequired && len(cfg.Tokens) == 0 {
		return nil, errors.New("httpapi: MetricsTokenRequired without Tokens: no token could read /metrics")
	}
	for _, t := range cfg.Tokens {
		s.tokens = append(s.tokens, configuredToken{Token: t, secret: []byte(t.Secret)})
	}
	rules, anyHost, err := parseAllowedHosts(cfg.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	s.allowedHosts, s.anyHost = rules, anyHost
	if cfg.ListenAddr != "" {
		host, port, err := net.SplitHostPort(cfg.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("httpapi: ListenAddr %q: %w", cfg.ListenAddr, err)
		}
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			s.listenHost, s.listenPort = strings.ToLower(host), port
		}
	}
	doc, err := OpenAPIDocument()
	if err != nil {
		return nil, err
	}
	s.openAPI = doc
	mux := http.NewServeMux()
	s.routes(mux)
	// The Host and Origin checks come first: a request a browser page forged
	// is refused before it can be authenticated, limited or routed.
	s.handler = s.withRequestID(s.withTracing(mux, s.withRecover(s.withLogging(s.withDiscard(
		s.withHostCheck(s.withOriginCheck(s.withAuth(mux, s.withLimits(jsonMuxErrors(mux))))))))))
	return s, nil
}

// routes registers every route. A route that reads a body names the media
// types it takes (415 for others); PATCH and step completion check theirs
// in the handler, after If-Match and the body, where their documented order
// of errors puts 415.
func (s *Server) routes(mux router) {
	mux.Handle("POST /v1/workflows", s.takes(jsonBody, s.createWorkflow))
	mux.HandleFunc("GET /v1/workflows", s.listWorkflows)
	mux.HandleFunc("GET /v1/workflows/{id}", s.getWorkflow)
	mux.HandleFunc("PATCH /v1/workflows/{id}", s.patchWorkflow)
	mux.HandleFunc("DELETE /v1/workflows/{id}", s.deleteWorkflow)
	mux.Handle("POST /v1/workflows/{id}/status", s.takes(jsonBody, s.transitionWorkflow))
	for _, name := range engine.Actions {
		mux.Handle("POST /v1/workflows/{id}/"+name, s.takes(jsonBody, s.actionHandler(name)))
	}
	mux.HandleFunc("POST /v1/workflows/{id}/steps/{step}/complete", s.completeStep)
	mux.Handle("POST /v1/workflows/{id}/rerun", s.takes(jsonBody, s.rerunWorkflow))
	mux.HandleFunc("GET /v1/workflows/{id}/history", s.history)
	mux.Handle("POST /v1/batch/status", s.takes(jsonBody, s.batchStatus))
	mux.Handle("POST /v1/events", s.takes(jsonBody, s.publishEvent))
	mux.Handle("PUT /v1/definitions/{name}", s.takes(definitionBody, s.putDefinition))
	mux.HandleFunc("GET /v1/definitions", s.listDefinitions)
	mux.HandleFunc("GET /v1/definitions/{name}", s.getDefinition)
	mux.HandleFunc("DELETE /v1/definitions/{name}", s.deleteDefinition)
	mux.Handle("POST /v1/tasks/poll", s.takes(jsonBody, s.pollTask))
	mux.Handle("POST /v1/tasks/{task_id}/complete", s.takes(jsonBody, s.completeTask))
	mux.Handle("POST /v1/tasks/{task_id}/fail", s.takes(jsonBody, s.failTask))
	mux.Handle("POST /v1/tasks/{task_id}/heartbeat", s.takes(jsonBody, s.heartbeatTask))
	mux.Handle("POST /v1/tasks/{task_id}/steps/{name}", s.takes(jsonBody, s.checkpoint))
	mux.Handle("POST /v1/tasks/{task_id}/suspend", s.takes(jsonBody, s.suspend))
	mux.Handle("POST /v1/tasks/{task_id}/variables/{key}", s.takes(jsonBody, s.setVariable))
	mux.Handle("POST /v1/tasks/{task_id}/search/{name}", s.takes(jsonBody, s.setSearch))
	mux.HandleFunc("GET /v1/workers", s.listWorkers)
	mux.HandleFunc("GET /v1/openapi.json", openAPIHandler(s.openAPI))
	s.scheduleRoutes(mux)
	s.bulkRoutes(mux)
	mux.HandleFunc("GET /healthz", s.healthz)
	// A collector that fails (flowd_workflows while the database is down)
	// leaves its metric out; the rest is still served.
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	// The dashboard: "/{$}" matches only "/", so unknown paths keep the API's
	// JSON 404; the page reaches the API through /v1 like any client.
	dashboard := web.Handler()
	mux.Handle("GET /{$}", dashboard)
	mux.Handle("GET "+web.AssetPrefix, dashboard)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// healthz answers 503 while the database does not answer, and while it is out
// of space (a write failed with store.ErrStorageFull and none has succeeded
// since: it answers reads, but cannot take writes). Only a store that watches
// its writes (store.StorageReporter, as the server's observed one does)
// can tell the second.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if sr, ok := s.cfg.Store.(store.StorageReporter); ok && sr.StorageFull() {
		writeErrorStatus(w, http.StatusServiceUnavailable, "the database is out of storage space: a write failed for lack of it and none has succeeded since")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(ctx); err != nil {
		s.log.WarnContext(r.Context(), "health check failed", "err", err)
		writeErrorStatus(w, http.StatusServiceUnavailable, "database unavailable")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// fail writes err as an API error; unexpected ones are logged with the request
// id and reported without internals.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client hung up (a long poll it gave up on): nobody reads an
		// answer, and it is not the server's error. 499 as nginx logs it.
		s.log.DebugContext(r.Context(), "client went away", "err", err, "request_id", requestID(r.Context()))
		w.WriteHeader(statusClientClosedRequest)
		return
	}
	status := statusFor(err)
	msg := err.Error()
	var ae *apiError
	var tooLarge *workflow.StateTooLargeError
	switch {
	case errors.As(err, &ae):
		msg = ae.msg // without the wrapping of the layers it passed through
	case errors.As(err, &tooLarge):
		msg = tooLarge.Error() + " (--max-state-bytes); nothing was written"
	}
	switch {
	case status == http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "request failed", "err", err, "request_id", requestID(r.Context()))
		msg = "internal error; see the server log for request " + requestID(r.Context())
	case status == http.StatusInsufficientStorage:
		s.log.ErrorContext(r.Context(), "database out of storage space", "err", err, "request_id", requestID(r.Context()))
		msg = "the database is out of storage space; nothing was written"
	case errors.Is(err, store.ErrOutcomeUnknown):
		s.log.WarnContext(r.Context(), "database connection lost during a commit", "err", err, "request_id", requestID(r.Context()))
		msg = "the database connection broke while the write was being committed: it may or may not have been stored; read the workflow before repeating the request"
	case errors.Is(err, store.ErrUnavailable):
		s.log.WarnContext(r.Context(), "database unavailable", "err", err, "request_id", requestID(r.Context()))
		msg = "the database is unavailable; try again shortly"
	case status == http.StatusServiceUnavailable:
		msg = "the request timed out"
	case status == http.StatusConflict || status == http.StatusPreconditionFailed:
		// Lost races are expected under concurrency: debug, not error.
		s.log.DebugContext(r.Context(), "conflict", "err", err, "request_id", requestID(r.Context()))
	}
	body := ErrorBody{Error: http.StatusText(status), Message: msg}
	if errors.Is(err, store.ErrOutcomeUnknown) {
		body.Outcome = OutcomeUnknown
	}
	var de *workflow.DefinitionError
	var se *store.ScheduleError
	var be *engine.BulkError
	switch {
	case errors.As(err, &de):
		body.Problems = de.Problems
	case errors.As(err, &se):
		body.Problems = se.Problems
	case errors.As(err, &be):
		body.Problems = be.Problems
	}
	writeJSON(w, status, body)
}

// statusClientClosedRequest is nginx's status for a request whose client
// closed the connection before the answer.
const statusClientClosedRequest = 499

type ctxKey int

const requestIDKey ctxKey = 0

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// withRequestID accepts a sane incoming X-Request-Id or makes one, and echoes it.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// withRecover turns a panic into a logged 500 instead of a dropped connection.
func (s *Server) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic in handler", "panic", fmt.Sprint(v), "request_id", requestID(r.Context()), "stack", string(debug.Stack()))
				writeErrorStatus(w, http.StatusInternalServerError, "internal error; see the server log for request "+requestID(r.Context()))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// withLogging writes one structured line per request. Headers are never logged,
// so tokens cannot leak into logs.
func (s *Server) withLogging(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &httpstatus.Recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || r.URL.Path == "/metrics" || (isLongPoll(r) && rec.Status < 400) {
			level = slog.LevelDebug
		}
		s.log.Log(r.Context(), level, "http request",
			"method", r.Method, "path", r.URL.Path, "status", rec.Status,
			"duration_ms", float64(time.Since(start).Microseconds())/1000,
			"request_id", requestID(r.Context()))
	})
}

// isLongPoll reports a request that waits on purpose for work to come, and
// that idle workers repeat all day: logged at debug unless it fails, so an
// idle node's log is not a line per poll.
func isLongPoll(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/tasks/poll"
}

// withLimits bounds the body size and the handler's time. A body announced
// as too large is refused before a byte of it is read; a body found too
// large while read is refused by the handler (413 from readBody). Either
// way what is left of the body is drained after the answer
// (withDiscard).
func (s *Server) withLimits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			// The connection cannot carry another request after it.
			w.Header().Set("Connection", "close")
			writeErrorStatus(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes (Content-Length: %d)", MaxBodyBytes, r.ContentLength))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		}
		timeout := s.cfg.RequestTimeout
		if isLongPoll(r) {
			timeout = max(timeout, maxPollWait+10*time.Second) // a long poll waits on purpose
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// MaxDiscardBytes is how much of a refused request's body flowd reads and
// discards, after its answer, before closing the connection;
// discardTimeout bounds how long it waits for those bytes.
const (
	MaxDiscardBytes = 8 << 20
	discardTimeout  = 10 * time.Second
)

// withDiscard reads and discards, after an error answer, what is left of
// the request's body, up to MaxDiscardBytes: a body over the limit (413),
// or one refused before it was read (401, 403, 415, …). A connection
// closed with unread bytes in its receive buffer is reset, and a reset
// makes a client that sends its whole body before reading (most do) lose
// the answer, which it sees as a reset connection; read to its end, the
// body lets the connection close cleanly. The answer is sent first, so a
// client that reads while it sends has it at once.
func (s *Server) withDiscard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := r.Body
		rec := &httpstatus.Recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.Status < 400 || body == nil || body == http.NoBody {
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		_ = rc.SetReadDeadline(time.Now().Add(discardTimeout))
		_, _ = io.CopyN(io.Discard, body, MaxDiscardBytes)
	})
}

// jsonMuxErrors rewrites the mux's own plain-text 404/405 replies as JSON error
// bodies, so every error of the API has one shape.
func jsonMuxErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			rw := &muxErrorWriter{ResponseWriter: w, path: r.Method + " " + r.URL.Path}
			mux.ServeHTTP(rw, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type muxErrorWriter struct {
	http.ResponseWriter
	path      string
	rewritten bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(m.Header().Get("Content-Type"), "text/plain") {
		m.rewritten = true
		m.Header().Del("X-Content-Type-Options")
		msg := "no route " + m.path
		if code == http.StatusMethodNotAllowed {
			msg = "method not allowed on this route; allowed: " + m.Header().Get("Allow")
		}
		writeErrorStatus(m.ResponseWriter, code, msg)
		return
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *muxErrorWriter) Write(b []byte) (int, error) {
	if m.rewritten {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}

// readBody reads the whole (size-limited) body.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, httpError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", mbe.Limit))
	}
	if err != nil {
		return nil, httpError(http.StatusBadRequest, "reading request body: "+err.Error())
	}
	return b, nil
}

// readJSONBody reads a JSON body and passes it through checkJSON, the one
// guard of every JSON a client sends, before anything decodes it.
func readJSONBody(r *http.Request) ([]byte, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if err := checkJSON(b); err != nil {
		return nil, httpError(http.StatusBadRequest, "invalid JSON body: "+err.Error())
	}
	return b, nil
}

// decodeControl decodes a control body strictly: one JSON object, no unknown
// fields, nothing after it. An empty body is allowed only when allowEmpty.
func decodeControl(r *http.Request, v any, allowEmpty bool) error {
	b, err := readJSONBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return httpError(http.StatusBadRequest, "request body is empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return httpError(http.StatusBadRequest, "invalid JSON body: "+describeJSONError(err))
	}
	if dec.More() {
		return httpError(http.StatusBadRequest, "invalid JSON body: unexpected data after the JSON object")
	}
	var tail json.RawMessage
	if err := dec.Decode(&tail); err != io.EOF {
		return httpError(http.StatusBadRequest, "invalid JSON body: unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, not %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of JSON"
	}
	return err.Error()
}
