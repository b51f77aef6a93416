// Package postgres is the PostgreSQL implementation of the flowd state store
// (store.Backend), on pgx v5 and a pgxpool connection pool.
//
// It owns the PostgreSQL schema (embedded goose migrations in migrations/),
// the SQL of every store operation, and the mapping of PostgreSQL errors to the
// store contract's errors. It must not define semantics of its own: everything
// observable is specified by package store and checked by store/storetest, so
// the SQLite backend behaves identically. No pgx type leaves this package, SQL
// text is never built from input (step ids and isolation levels included), and
// Open never migrates: callers call Migrate.
//
// Happy-path writes are one statement each (a data-modifying CTE writes the
// instance and its history row together), so a write costs one round trip and
// holds its row lock only while the statement runs.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/dsn"
	"github.com/flowd/flowd/store"
)

// Options configure Open.
type Options struct {
	// Now is the clock of every timestamp the store writes; nil means
	// time.Now. Tests inject one to control updated_at.
	Now func() time.Time
	// MaxConns bounds the connection pool; 0 means 32, unless the URL sets
	// pool_max_conns.
	MaxConns int32
	// Tracer, if set, sees every statement the store sends (tests use it to
	// count round trips; it may also feed metrics or logs).
	Tracer pgx.QueryTracer
}

const (
	defaultMaxConns = 32
	// idleInTxTimeout makes the server end a session left idle inside a
	// transaction (a client that died or hung mid-transaction, pgx issue
	// #2100), so its row locks cannot block other writers for ever.
	idleInTxTimeout = "60s"
	// rollbackTimeout bounds a rollback, which runs on a context that is not
	// cancelled.
	rollbackTimeout = 5 * time.Second
	// commitTimeout bounds the writes and COMMIT of a claim that has been
	// decided, which run on a context that is not cancelled.
	commitTimeout = 10 * time.Second
)

// Store is a store.Backend on a PostgreSQL database. It is safe for concurrent
// use; its methods (the embedded querier) run on the pool, each write being
// atomic on its own.
type Store struct {
	querier
	pool *pgxpool.Pool

	// closing is closed by Close, which then waits for the listeners
	// (Listen) to close their connections. mu orders Listen's start of a
	// listener and Close.
	mu        sync.Mutex
	closed    bool
	closing   chan struct{}
	listeners sync.WaitGroup
}

var _ store.Backend = (*Store)(nil)

// Open connects to the PostgreSQL database at url (postgres://… or
// postgresql://…) and checks that it answers. It does not migrate.
//
// A database that does not answer yet (refused or broken connections, a
// server starting up or shutting down) is an error that errors.Is
// store.ErrUnavailable, which a caller may wait out; a wrong password or
// database name is not. No error shows the password of url.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	s, err := openPool(ctx, url, opts)
	return s, dsn.RedactError(err, url)
}

func openPool(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := parseConfig(url, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	// The pool connects lazily; ping so that a wrong address or password is
	// reported by Open, not by the first operation.
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", interpretError(err, ""))
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{querier: querier{db: pool, pool: pool, now: now}, pool: pool, closing: make(chan struct{})}, nil
}

// parseConfig turns url and opts into a pool configuration. Errors never
// repeat the URL: it may hold a password (pgx's own parse errors redact it).
func parseConfig(rawURL string, opts Options) (*pgxpool.Config, error) {
	if !strings.HasPrefix(rawURL, "postgres://") && !strings.HasPrefix(rawURL, "postgresql://") {
		return nil, errors.New("postgres: open: the database URL must start with postgres:// or postgresql://")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: malformed database URL: %w", redactURLError(err))
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !u.Query().Has("pool_max_conns"):
		cfg.MaxConns = defaultMaxConns
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	params := cfg.ConnConfig.RuntimeParams
	if _, ok := params["idle_in_transaction_session_timeout"]; !ok {
		params["idle_in_transaction_session_timeout"] = idleInTxTimeout
	}
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "flowd"
	}
	return cfg, nil
}

// redactURLError drops the URL from a url.Error: it may contain a password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Capabilities reports PostgreSQL's concurrent writers.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Name: "postgres", ConcurrentWriters: true}
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return interpretError(s.pool.Ping(ctx), "")
}

// Close stops the listeners and closes the pool, waiting for connections in
// use to be released.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.listeners.Wait()
	s.pool.Close()
	return nil
}

// runTx runs fn in a transaction on the pool and commits it. fn's error is
// returned as is (it already is a store error); begin and commit errors are
// mapped. q must be bound to the pool.
func (q *querier) runTx(ctx context.Context, level pgx.TxIsoLevel, fn func(*querier) error) error {
	tx, err := q.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
	if err != nil {
		return interpretError(err, "")
	}
	// Deferred so that a panic in fn rolls back too; after a commit it is a
	// no-op that sends nothing.
	defer rollback(ctx, tx)
	if err := fn(&querier{db: tx, now: q.now}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return commitOutcome(interpretError(err, ""))
	}
	return nil
}

// rollback rolls tx back on a context that is not cancelled: when the
// request's context is cancelled, the rollback must still reach the server, or
// the session could stay "idle in transaction" holding its locks (pgx issue
// #2100). If it fails, pgx closes the connection, which ends the transaction
// as well.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}
