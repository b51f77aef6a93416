package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/examples"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/internal/storeopen"
	"github.com/flowd/flowd/server"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/worker"
)

// serveConfig is everything `flowd serve` is told; Validate checks it before
// anything is opened.
type serveConfig struct {
	DB            string
	Addr          string
	TokenFile     string
	Insecure      bool
	AllowedHosts  []string
	Workers       int
	Lease         time.Duration
	SweepInterval time.Duration
	// ScheduleInterval is how often this node looks for due schedule
	// fires: a fire starts up to this late.
	ScheduleInterval time.Duration
	// MaxStateBytes bounds an instance's state after a change (413 above).
	MaxStateBytes int
	// ShutdownTimeout bounds the graceful shutdown on SIGTERM/SIGINT.
	ShutdownTimeout time.Duration
	// Retention: finished workflows unchanged for this long are deleted
	// (0 keeps them).
	Retention retentionFlag
	// EventRetention: how long a published event is kept for wait steps
	// that start waiting later.
	EventRetention retentionFlag
	LogLevel       string
	LogFormat      string
	DemoHandlers   bool
	Demo           bool
	// OutboundAllow opens addresses to the calls definitions make, which
	// the outbound policy refuses by default (loopback, private…).
	OutboundAllow []string
	// DBWait is how long serve waits at start for a database that does
	// not answer yet.
	DBWait time.Duration
	// MetricsTokenRequired makes /metrics need a token of any role.
	MetricsTokenRequired bool
	// MaxVersions bounds the versions of an instance: past it the instance
	// fails, with an error naming the limit.
	MaxVersions int
	// MaxDescendants bounds the child workflows, and theirs, under one
	// top-level workflow: the instance that would start one more fails.
	MaxDescendants int
}

func (c *serveConfig) Validate() error {
	var errs []error
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("--workers must not be negative, got %d", c.Workers))
	}
	if c.Lease <= 0 {
		errs = append(errs, fmt.Errorf("--lease must be positive, got %s", c.Lease))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("--sweep-interval must be positive, got %s", c.SweepInterval))
	}
	if c.ScheduleInterval <= 0 {
		errs = append(errs, fmt.Errorf("--schedule-interval must be positive, got %s", c.ScheduleInterval))
	}
	if c.MaxStateBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-state-bytes must be positive, got %d", c.MaxStateBytes))
	}
	if c.DBWait < 0 {
		errs = append(errs, fmt.Errorf("--db-wait must not be negative (0 tries once), got %s", c.DBWait))
	}
	if c.MaxVersions <= 0 {
		errs = append(errs, fmt.Errorf("--max-versions must be positive, got %d", c.MaxVersions))
	}
	if c.MaxDescendants <= 0 || c.MaxDescendants > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("--max-descendants must be between 1 and %d, got %d", math.MaxInt32, c.MaxDescendants))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout must be positive, got %s", c.ShutdownTimeout))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("--retention must not be negative (0 keeps finished workflows for ever), got %s", time.Duration(c.Retention)))
	}
	if c.EventRetention <= 0 {
		errs = append(errs, fmt.Errorf("--event-retention must be positive, got %s", time.Duration(c.EventRetention)))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat))
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("--addr %q: %v (want host:port, e.g. 127.0.0.1:8080)", c.Addr, err))
	} else if c.TokenFile == "" && !c.Insecure && !server.IsLoopback(host) {
		errs = append(errs, fmt.Errorf("refusing to listen on non-loopback address %s without authentication: pass --token-file (or FLOWD_TOKEN_FILE), or --insecure to accept the risk", c.Addr))
	}
	if err := httpapi.ValidateAllowedHosts(c.AllowedHosts); err != nil {
		errs = append(errs, fmt.Errorf("--allowed-hosts: %w", err))
	}
	if _, err := outbound.Parse(c.OutboundAllow); err != nil {
		errs = append(errs, fmt.Errorf("--outbound-allow: %w", err))
	}
	if c.MetricsTokenRequired && c.TokenFile == "" {
		errs = append(errs, errors.New("--metrics-token-required needs --token-file: without tokens no one could read /metrics"))
	}
	return errors.Join(errs...)
}

// retentionFlag is --retention: a Go duration, like the other duration
// flags, whose error says how to write days (a unit Go durations lack).
type retentionFlag time.Duration

// String is "0" for the default, so that the help shows no "(default 0s)"
// beside a text that says what 0 means.
func (r *retentionFlag) String() string {
	if *r == 0 {
		return "0"
	}
	return time.Duration(*r).String()
}

func (r *retentionFlag) Type() string { return "duration" }

func (r *retentionFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if strings.HasSuffix(s, "d") {
			return fmt.Errorf("%q is not a duration: write days in hours, e.g. 720h for 30 days", s)
		}
		return fmt.Errorf("%q is not a duration such as 720h or 90m", s)
	}
	*r = retentionFlag(d)
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", s)
	}
	return l, nil
}

// readTokens reads the token file: one token a line, `TOKEN` (role admin)
// or `TOKEN ROLE [NAME]` (httpapi.ParseTokens); blank lines and lines
// starting with # are skipped.
func readTokens(path string) ([]httpapi.Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading token file: %w", err)
	}
	tokens, err := httpapi.ParseTokens(string(b))
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tokens, nil
}

func newServeCmd(e *env) *cobra.Command {
	cfg := serveConfig{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API, the engine and the dashboard",
		Long: `serve runs the HTTP API (/v1), the dashboard (/), /healthz and /metrics in one
process, on the embedded SQLite database by default. It migrates the database on
start. Several serve processes may share one PostgreSQL database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return &exitCodeError{code: exitUsage, err: err}
			}
			return serve(cmd.Context(), cfg, e)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DB, "db", storeopen.DefaultURL, "database URL: postgres://… or sqlite:PATH")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address")
	f.StringVar(&cfg.TokenFile, "token-file", "", "file of bearer tokens, one a line: TOKEN (role admin) or TOKEN ROLE [NAME], ROLE admin, operator, worker or reader; when set every /v1 route requires one whose role may use it")
	f.BoolVar(&cfg.Insecure, "insecure", false, "allow a non-loopback --addr without --token-file")
	f.StringSliceVar(&cfg.AllowedHosts, "allowed-hosts", nil, "Host header values answered besides localhost, loopback addresses and --addr: host or host:port, comma-separated or repeated; * for any. Others get 421")
	f.IntVar(&cfg.Workers, "workers", 8, "in-process step concurrency")
	f.DurationVar(&cfg.Lease, "lease", 30*time.Second, "lease for in-process steps and the default for remote workers")
	f.DurationVar(&cfg.SweepInterval, "sweep-interval", time.Second, "how often timeouts and expired leases are swept")
	f.DurationVar(&cfg.ScheduleInterval, "schedule-interval", time.Second, "how often this node looks for due schedule fires; a fire starts up to this late")
	f.IntVar(&cfg.MaxStateBytes, "max-state-bytes", engine.DefaultMaxStateBytes, "largest instance state, in bytes, a change may leave: a create, patch or step completion beyond it is refused with 413 and nothing is written")
	f.Var(&cfg.Retention, "retention", "delete finished workflows (COMPLETED, FAILED, CANCELLED, TIMED_OUT) with their history once unchanged for this long, e.g. 720h for 30 days; a definition's own retention: replaces it for its workflows; 0, the default, keeps them for ever")
	cfg.EventRetention = retentionFlag(engine.DefaultEventRetention)
	f.Var(&cfg.EventRetention, "event-retention", "keep published events this long: a wait step that starts waiting later still takes one published since its workflow was created and within this time")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "on SIGTERM/SIGINT, how long in-flight requests and in-process steps may take to finish before their steps are cancelled and released")
	f.BoolVar(&cfg.DemoHandlers, "demo-handlers", false, "also run the demo handlers echo, sleep and fail in process")
	f.BoolVar(&cfg.Demo, "demo", false, "run the demo handlers and, when the database has no definitions yet, load the example workflows and start a few")
	f.StringSliceVar(&cfg.OutboundAllow, "outbound-allow", nil, "open addresses to the calls definitions make (http steps, Serverless Workflow call: http and call: openapi), which may not reach loopback, private, link-local (cloud metadata), unspecified or multicast addresses otherwise: CIDR, HOST or HOST:PORT, comma-separated or repeated; * turns the check off; --demo opens loopback. See \"Outbound calls\" in docs/production.md")
	f.IntVar(&cfg.MaxDescendants, "max-descendants", engine.DefaultMaxDescendants, "most child workflows, with their own descendants, one top-level workflow may start: the workflow that would start one more (a recursive child step) fails, with an error naming this limit")
	f.IntVar(&cfg.MaxVersions, "max-versions", engine.DefaultMaxVersions, "most versions a workflow instance may have: one that would go past it (a task that jumps to itself, a step retried without end) fails, with an error naming this limit")
	f.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&cfg.LogFormat, "log-format", "text", "text or json")
	f.BoolVar(&cfg.MetricsTokenRequired, "metrics-token-required", false, "/metrics needs a bearer token of any role too; needs --token-file")
	f.DurationVar(&cfg.DBWait, "db-wait", 60*time.Second, "at start, how long to wait for a database that does not answer yet (refused connections, a server starting up), trying again and logging each try; 0 tries once")
	markEnv(f)
	return cmd
}

func serve(ctx context.Context, cfg serveConfig, e *env) error {
	level, _ := parseLevel(cfg.LogLevel)
	var handler slog.Handler = slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})
	if cfg.LogFormat == "json" {
		handler = slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(handler)

	var tokens []httpapi.Token
	if cfg.TokenFile != "" {
		var err error
		if tokens, err = readTokens(cfg.TokenFile); err != nil {
			return err
		}
	}

	outboundAllow := cfg.OutboundAllow
	if cfg.Demo {
		// The demo's http step calls this machine.
		outboundAllow = append(slices.Clone(outboundAllow), outbound.Loopback...)
	}
	srv, err := server.New(ctx, server.Config{
		DB: cfg.DB, Addr: cfg.Addr, Tokens: tokens, Insecure: cfg.Insecure, AllowedHosts: cfg.AllowedHosts,
		Workers: &cfg.Workers, Lease: cfg.Lease, SweepInterval: cfg.SweepInterval, ScheduleInterval: cfg.ScheduleInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: log, MaxStateBytes: cfg.MaxStateBytes,
		Retention: time.Duration(cfg.Retention), EventRetention: time.Duration(cfg.EventRetention),
		OutboundAllow:        outboundAllow,
		DBWait:               cfg.DBWait,
		MetricsTokenRequired: cfg.MetricsTokenRequired,
		MaxVersions:          cfg.MaxVersions, MaxDescendants: cfg.MaxDescendants,
	})
	if err != nil {
		return err
	}
	if cfg.DemoHandlers || cfg.Demo {
		for name, h := range worker.DemoHandlers() {
			if err := srv.Register(name, h); err != nil {
				srv.Close()
				return err
			}
		}
	}
	if err := srv.Start(ctx); err != nil {
		srv.Close()
		return err
	}
	url := srv.URL()
	fmt.Fprintf(e.stdout, "flowd is serving the API at %s/v1 and the dashboard at %s/\n", url, url)
	if cfg.Demo {
		if err := seedDemo(ctx, srv.Engine(), log); err != nil {
			srv.Close()
			return err
		}
	} else if empty, err := isEmpty(ctx, srv.Store()); err == nil && empty {
		fmt.Fprintf(e.stdout, "the database is empty: restart with --demo to load the example workflows (or run `flowd demo` against a server with --demo-handlers)\n")
	}
	err = srv.Run(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Past the timeout the steps still running were released for another
		// node: a stop that did its job, not a failure of the process.
		log.Warn("shutdown timeout reached: steps still running were cancelled and released", "timeout", cfg.ShutdownTimeout)
		return nil
	}
	return err
}

// engineTarget seeds the demo through the engine in this process.
type engineTarget struct{ eng *engine.Engine }

func (t engineTarget) PutDefinition(ctx context.Context, body []byte) error {
	_, _, err := t.eng.PutDefinition(ctx, body)
	return err
}

func (t engineTarget) Start(ctx context.Context, def string, input json.RawMessage) (string, error) {
	inst, err := t.eng.StartWorkflow(ctx, engine.StartParams{Definition: def, Input: input})
	if err != nil {
		return "", err
	}
	return inst.ID, nil
}

// seedDemo loads the examples once: a database that already has definitions
// is left alone, so restarting with --demo never duplicates the demo.
func seedDemo(ctx context.Context, eng *engine.Engine, log *slog.Logger) error {
	defs, err := eng.ListDefinitions(ctx)
	if err != nil {
		return err
	}
	if len(defs) > 0 {
		log.Info("demo: the database already has definitions; not loading the examples again")
		return nil
	}
	ids, err := examples.Seed(ctx, engineTarget{eng})
	if err != nil {
		return fmt.Errorf("loading the demo: %w", err)
	}
	log.Info("demo: loaded the example definitions and started workflows", "workflows", len(ids))
	return nil
}

// isEmpty reports whether the database has no workflow instance at all.
func isEmpty(ctx context.Context, st store.Backend) (bool, error) {
	counts, err := store.CountByStatus(ctx, st)
	if err != nil {
		return false, err
	}
	for _, n := range counts {
		if n > 0 {
			return false, nil
		}
	}
	return true, nil
}
