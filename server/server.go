// Package server runs flowd inside a Go program: the HTTP API (/v1), the
// dashboard, /healthz and /metrics, and the engine with in-process handlers
// written in Go — the same wiring `flowd serve` uses.
//
// A program opens a server on its database, registers its handlers, starts
// it, and talks to it through the client Client returns (or any HTTP client,
// remote workers and the flowd CLI):
//
//	s, err := server.New(ctx, server.Config{DB: "sqlite:app.db", Addr: "127.0.0.1:0"})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	s.Register("greet", func(ctx context.Context, t engine.Task) (json.RawMessage, error) {
//		return json.RawMessage(`{"hello": "world"}`), nil
//	})
//	if err := s.Start(ctx); err != nil {
//		return err
//	}
//	c := s.Client() // an *client.Client of s.URL()
//	…
//	return s.Shutdown(ctx) // or s.Run(ctx): serve until ctx ends, then shut down
//
// Shutdown is graceful: long polls of remote workers end at once with no
// task, requests in flight finish, and in-process steps in flight run to
// completion and are recorded; past the shutdown's deadline their handlers
// are cancelled and their tasks released for another node.
//
// The package wires the other packages together; it holds no rule of its own
// about workflows, storage or HTTP.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/dsn"
	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/metrics"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/observed"
	"github.com/flowd/flowd/workflow"
)

// Defaults of Config.
const (
	DefaultDB              = storeopen.DefaultURL
	DefaultAddr            = "127.0.0.1:8080"
	DefaultShutdownTimeout = 30 * time.Second
)

// Config configures a Server. Zero values take the defaults in brackets.
type Config struct {
	// DB is the database URL: "sqlite:PATH" or "postgres://…" [sqlite:flowd.db].
	// The database is migrated by New.
	DB string
	// Addr is the listen address; port 0 picks a free port, see URL [127.0.0.1:8080].
	Addr string
	// Tokens, when not empty, are the bearer tokens the /v1 routes
	// require, each with its role and name (httpapi.Token; httpapi.AdminTokens
	// makes admin tokens of secrets). Without tokens the server listens on
	// loopback addresses only, unless Insecure is set.
	Tokens   []httpapi.Token
	Insecure bool
	// MetricsTokenRequired makes /metrics need a token (of any role) too;
	// it needs Tokens.
	MetricsTokenRequired bool
	// AllowedHosts are the Host header values answered besides localhost,
	// loopback addresses and Addr itself: "host" (any port) or "host:port",
	// or "*" for any. Requests naming another host get 421, which keeps web
	// pages from reaching the server through DNS rebinding. A server on
	// 0.0.0.0 or [::] lists the names its clients (and load balancer) use.
	AllowedHosts []string
	// OutboundAllow opens addresses to the calls definitions make (http
	// steps, Serverless Workflow call: http and call: openapi), which
	// otherwise reach only globally routable addresses that are not this
	// host's: loopback, private, link-local (cloud metadata), unspecified
	// and multicast addresses are refused. Entries are "CIDR", "HOST" or
	// "HOST:PORT"; "*" turns the check off (engine.Config.OutboundAllow)
	// [nothing opened].
	OutboundAllow []string
	// Workers is the in-process step concurrency [8]; 0 runs no step in
	// process (remote workers, or another node, run them).
	Workers *int
	// Lease is the lease of in-process steps and the default for remote workers [30s].
	Lease time.Duration
	// SweepInterval is how often timeouts and expired leases are swept [1s].
	SweepInterval time.Duration
	// ScheduleInterval is how often the node's scheduler looks for due
	// fire times of the schedules [1s]. A fire is late by up to this much.
	ScheduleInterval time.Duration
	// MaxStateBytes bounds an instance's state after a change by a client
	// or a handler: a larger one is refused (HTTP 413) and nothing is
	// written [engine.DefaultMaxStateBytes, 4 MiB].
	MaxStateBytes int
	// Retention is how long a finished workflow (COMPLETED, FAILED,
	// CANCELLED, TIMED_OUT) is kept after its last change: the sweeper then
	// deletes it with its history. A definition's own `retention` replaces
	// it for its instances [0: kept for ever].
	Retention time.Duration
	// EventRetention is how long a published event is kept for the wait
	// steps that start waiting later [engine.DefaultEventRetention].
	EventRetention time.Duration
	// DBWait is how long New waits for a database that does not answer
	// yet (refused connections, a server starting up), trying again and
	// logging each try; other errors, such as a wrong password, end New at
	// once [0: one try].
	DBWait time.Duration
	// ShutdownTimeout bounds the graceful shutdown of Run [30s].
	ShutdownTimeout time.Duration
	// Logger receives the server's structured log [discarded].
	Logger *slog.Logger
	// MaxVersions bounds the versions of an instance: past it the instance
	// fails with an error naming the limit [engine.DefaultMaxVersions].
	MaxVersions int
	// MaxDescendants bounds the child workflows, and theirs, under one
	// top-level workflow: the instance that would start one more fails
	// with an error naming the limit [engine.DefaultMaxDescendants].
	MaxDescendants int
	// TracerProvider receives the server's spans: HTTP requests, store
	// operations and transactions, step attempts. Nil reads the standard
	// OTEL_* environment (otlp.FromEnv): spans are exported over
	// OTLP/HTTP when it asks for them, and nothing is traced when it does
	// not [nil].
	TracerProvider trace.TracerProvider
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Workers != nil && *c.Workers < 0 {
		errs = append(errs, fmt.Errorf("server: Workers must not be negative, got %d", *c.Workers))
	}
	if c.Lease < 0 {
		errs = append(errs, fmt.Errorf("server: Lease must not be negative, got %s", c.Lease))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("server: SweepInterval must not be negative, got %s", c.SweepInterval))
	}
	if c.ScheduleInterval < 0 {
		errs = append(errs, fmt.Errorf("server: ScheduleInterval must not be negative, got %s", c.ScheduleInterval))
	}
	if c.MaxStateBytes < 0 {
		errs = append(errs, fmt.Errorf("server: MaxStateBytes must not be negative, got %d", c.MaxStateBytes))
	}
	if c.DBWait < 0 {
		errs = append(errs, fmt.Errorf("server: DBWait must not be negative, got %s", c.DBWait))
	}
	if c.MaxVersions < 0 {
		errs = append(errs, fmt.Errorf("server: MaxVersions must not be negative, got %d", c.MaxVersions))
	}
	if c.MaxDescendants < 0 {
		errs = append(errs, fmt.Errorf("server: MaxDescendants must not be negative, got %d", c.MaxDescendants))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("server: ShutdownTimeout must not be negative, got %s", c.ShutdownTimeout))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("server: Retention must not be negative, got %s", c.Retention))
	}
	if c.EventRetention < 0 {
		errs = append(errs, fmt.Errorf("server: EventRetention must not be negative, got %s", c.EventRetention))
	}
	addr := c.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("server: Addr %q: %w (want host:port, e.g. 127.0.0.1:8080)", addr, err))
	} else if len(c.Tokens) == 0 && !c.Insecure && !IsLoopback(host) {
		errs = append(errs, fmt.Errorf("server: refusing to listen on non-loopback address %s without authentication: set Tokens, or Insecure to accept the risk", addr))
	}
	if err := httpapi.ValidateAllowedHosts(c.AllowedHosts); err != nil {
		errs = append(errs, fmt.Errorf("server: AllowedHosts: %w", err))
	}
	if _, err := outbound.Parse(c.OutboundAllow); err != nil {
		errs = append(errs, fmt.Errorf("server: OutboundAllow: %w", err))
	}
	if c.MetricsTokenRequired && len(c.Tokens) == 0 {
		errs = append(errs, errors.New("server: MetricsTokenRequired needs Tokens"))
	}
	return errors.Join(errs...)
}

// IsLoopback reports whether host (of a listen address) only accepts
// connections from this machine.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is flowd running in this process. Its methods are safe for
// concurrent use.
type Server struct {
	cfg           Config
	log           *slog.Logger
	base          store.Backend // closed last
	st            store.Backend // base, observed (store/observed)
	eng           *engine.Engine
	registry      *prometheus.Registry
	schemaVersion int64
	tracer        trace.TracerProvider
	// ownTracer is the provider New built from the environment: Shutdown
	// flushes and stops it.
	ownTracer *sdktrace.TracerProvider

	mu       sync.Mutex
	started  bool
	ln       net.Listener
	http     *http.Server
	serveErr chan error // the HTTP server's end, once started
	requests inflight

	shutdownOnce sync.Once
	shutdownErr  error
	shutdownDone chan struct{}
}

// New opens and migrates the database and builds the engine and the API. It
// does not listen yet: Register the in-process handlers, then Start. Close
// (or Shutdown) releases the database even when Start was never called.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DB == "" {
		cfg.DB = DefaultDB
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, err := openDatabase(ctx, cfg.DB, cfg.DBWait, log)
	if err != nil {
		return nil, err
	}
	rep, err := base.Migrate(ctx)
	if err != nil {
		base.Close()
		return nil, fmt.Errorf("migrating %s: %w", dsn.Redact(cfg.DB), err)
	}
	for _, m := range rep.Applied {
		log.Info("applied migration", "name", m.Name, "version", m.Version, "duration", m.Duration)
	}
	tp, own, err := tracerProvider(ctx, cfg.TracerProvider)
	if err != nil {
		base.Close()
		return nil, err
	}
	m := metrics.New()
	st := observed.Wrap(base, tp, m)
	m.RegisterWorkflowGauge(func(ctx context.Context) (map[workflow.Status]int64, error) {
		return store.CountByStatus(ctx, st)
	}, log)
	m.RegisterQueuedGauge(func(ctx context.Context) (map[string]int64, error) {
		c, err := st.CountInstances(ctx, store.CountParams{Queued: true})
		return c.Queued, err
	}, log)
	eng, err := engine.New(engine.Config{
		Store: st, Logger: log, Metrics: m, Workers: cfg.Workers, Lease: cfg.Lease, SweepInterval: cfg.SweepInterval,
		ScheduleInterval: cfg.ScheduleInterval,
		MaxStateBytes:    cfg.MaxStateBytes, Retention: cfg.Retention, EventRetention: cfg.EventRetention,
		TracerProvider: tp,
		OutboundAllow:  cfg.OutboundAllow,
		MaxVersions:    cfg.MaxVersions,
		MaxDescendants: cfg.MaxDescendants,
	})
	if err != nil {
		_ = shutdownTracer(ctx, own) // nothing was traced yet
		base.Close()
		return nil, err
	}
	return &Server{
		cfg: cfg, log: log, base: base, st: st, eng: eng, registry: m.Registry, schemaVersion: rep.Version,
		tracer: tp, ownTracer: own,
		shutdownDone: make(chan struct{}),
	}, nil
}

// ErrStarted is returned by Register and Start once the server has started.
var ErrStarted = errors.New("server: already started")

// Register adds an in-process handler for the task steps whose handler is
// name; a definition's step `{type: task, handler: name}` then runs h in this
// process. Handlers are fixed once the server starts: Register after Start
// returns ErrStarted and changes nothing.
func (s *Server) Register(name string, h engine.Handler) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("%w: register handler %q before Start", ErrStarted, name)
	}
	if name == "" || h == nil {
		return errors.New("server: Register needs a handler name and a handler")
	}
	s.eng.Register(name, h)
	return nil
}

// Engine returns the engine, to start workflows or store definitions without
// going through HTTP.
func (s *Server) Engine() *engine.Engine { return s.eng }

// Store returns the store the server writes through (observed for /metrics and traces).
func (s *Server) Store() store.Backend { return s.st }

// SchemaVersion is the database schema version after New's migration.
func (s *Server) SchemaVersion() int64 { return s.schemaVersion }

// Start listens on Config.Addr, starts the engine and serves HTTP in the
// background. It returns once the server accepts connections. ctx only
// carries values: Shutdown, Close or Run end the server.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	select {
	case <-s.shutdownDone:
		return errors.New("server: Start after Shutdown or Close")
	default:
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Addr, err)
	}
	// The API is built once the port is known: requests naming the listen
	// address are answered.
	api, err := s.newAPI(ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}
	if err := s.eng.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	s.started, s.ln = true, ln
	s.http = &http.Server{
		Handler:           s.requests.count(api),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.http.Serve(httpapi.JSONErrorListener(ln)) }()
	s.log.Info("flowd serving", "url", s.url(), "db", dsn.Redact(s.cfg.DB), "schema_version", s.schemaVersion, "auth", len(s.cfg.Tokens) > 0)
	return nil
}

// newAPI builds the HTTP API for a server listening on listenAddr.
func (s *Server) newAPI(listenAddr string) (*httpapi.Server, error) {
	allowed := s.cfg.AllowedHosts
	host, _, _ := net.SplitHostPort(s.cfg.Addr)
	_, port, _ := net.SplitHostPort(listenAddr)
	switch ip := net.ParseIP(host); {
	case host != "" && ip == nil:
		// Addr names a host (flowd.internal:8080): that name is the
		// listen address its clients use, with the port resolved.
		allowed = append(append([]string(nil), allowed...), net.JoinHostPort(host, port))
	case len(allowed) == 0 && (host == "" || ip.IsUnspecified()):
		s.log.Warn("listening on every address, but only requests whose Host is localhost or a loopback address are answered (421 otherwise): list the names and addresses clients use with --allowed-hosts",
			"addr", listenAddr)
	}
	return httpapi.NewServer(httpapi.Config{
		Store: s.st, Engine: s.eng, Logger: s.log, Tokens: s.cfg.Tokens, MetricsTokenRequired: s.cfg.MetricsTokenRequired, Registry: s.registry,
		ListenAddr: listenAddr, AllowedHosts: allowed, TracerProvider: s.tracer,
	})
}

// URL is the server's base URL, such as http://127.0.0.1:41234 (with the
// port chosen for port 0); "" before Start. The API is under URL()+"/v1",
// the dashboard at URL()+"/".
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url()
}

func (s *Server) url() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Client returns a client of this server, authenticated with the first of
// Config.Tokens (whatever its role) if any; opts come after and may override it. Call it after
// Start.
func (s *Server) Client(opts ...client.Option) *client.Client {
	if len(s.cfg.Tokens) > 0 {
		opts = append([]client.Option{client.WithToken(s.cfg.Tokens[0].Secret)}, opts...)
	}
	return client.New(s.URL(), opts...)
}

// Run starts the server if it is not started yet, serves until ctx ends,
// and then shuts down gracefully within Config.ShutdownTimeout. It returns
// nil after a shutdown in which everything finished in time; the error of
// Shutdown when the timeout cut in-process steps short (their tasks were
// released); or the HTTP server's error if serving failed.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		if err := s.Start(ctx); err != nil {
			s.Close()
			return err
		}
	}
	select {
	case err := <-s.serveErr:
		s.Close()
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down: waiting for in-flight requests and steps", "timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}

// Shutdown stops the server gracefully: at once it stops accepting
// connections and claiming tasks, and long polls (POST /v1/tasks/poll) end
// with 204. Then it waits, until ctx ends, for the requests in flight and the
// in-process steps in flight, whose results are recorded. When ctx ends
// first, the remaining connections are closed and the remaining handlers are
// cancelled and their tasks released (claimable again at once), and the error
// wraps ctx's cause. The database is closed last. Later calls return the
// first call's result once it is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		defer close(s.shutdownDone)
		s.mu.Lock()
		srv := s.http
		s.mu.Unlock()
		var engErr, httpErr error
		var wg sync.WaitGroup
		// Draining the engine first ends the long polls, which would
		// otherwise hold the HTTP shutdown for their whole wait.
		wg.Go(func() { engErr = s.eng.Shutdown(ctx) })
		if srv != nil {
			if httpErr = srv.Shutdown(ctx); httpErr != nil {
				// net/http counts a keep-alive connection whose response was
				// just written as busy until it is marked idle; only handlers
				// still running were really cut off.
				running := s.requests.running()
				srv.Close()
				if httpErr = nil; running > 0 {
					httpErr = fmt.Errorf("server: %d requests still running at the shutdown deadline were cut off: %w", running, context.Cause(ctx))
				}
			}
		}
		wg.Wait()
		if err := shutdownTracer(ctx, s.ownTracer); err != nil {
			s.log.Warn("tracing", "err", err)
		}
		s.base.Close()
		s.shutdownErr = errors.Join(engErr, httpErr)
		if s.shutdownErr == nil {
			s.log.Info("stopped")
		} else {
			s.log.Warn("stopped past the shutdown deadline", "err", s.shutdownErr)
		}
	})
	<-s.shutdownDone
	return s.shutdownErr
}

// Close stops the server at once: connections are closed, in-process
// handlers cancelled and their tasks released. It is Shutdown with a
// deadline already past: the error says what had to be cut short, if
// anything.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.Shutdown(ctx)
}
