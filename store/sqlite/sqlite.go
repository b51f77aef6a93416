// Package sqlite is the embedded SQLite implementation of the flowd state store
// (store.Backend), on the pure-Go driver modernc.org/sqlite through database/sql:
// one file, no server, no cgo.
//
// It owns the SQLite schema (embedded goose migrations in migrations/), the SQL
// of every store operation, the connection setup that makes SQLite safe under
// concurrent writers, and the mapping of SQLite errors to the store contract's
// errors. It must not define semantics of its own: everything observable is
// specified by package store and checked by store/storetest, so the PostgreSQL
// backend behaves identically. No driver type leaves this package, SQL text is
// never built from input (step ids included: a step is completed in Go, inside
// the write transaction, not through a JSON path string), and Open never
// migrates: callers call Migrate.
//
// # Locking
//
// SQLite has one writer at a time per database file. A write that starts as a
// reader and later upgrades its lock can fail at once with "database is locked"
// however long busy_timeout is, so every write transaction is BEGIN IMMEDIATE
// (it takes the write lock up front and waits for it under busy_timeout).
// Within one Store, writes go through a pool of exactly one connection: waiting
// for the pool is cheaper than waiting in SQLite's busy loop, and one writer
// was measured to be as fast as sixteen. Reads outside a transaction go to a
// separate pool of read-only connections, which WAL lets run beside the writer.
// A write transaction never touches the read pool: all its statements run on
// its own connection.
//
// Every transaction is therefore serializable. For the same reason the engine's lock modes (FOR UPDATE, SKIP LOCKED on
// PostgreSQL) need no SQL here: a transaction that holds the write lock
// already excludes every other writer (see tasks.go).
//
// # In-memory databases
//
// sqlite::memory: opens a throwaway database that lives in one connection:
// every new connection to ":memory:" would be a different, empty database.
// Reads and writes therefore share one pool of exactly one connection, which is
// never closed while the Store is open; operations simply take turns.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/flowd/flowd/store"
)

// Options configure Open.
type Options struct {
	// Now is the clock of every timestamp the store writes; nil means
	// time.Now. Tests inject one to control updated_at.
	Now func() time.Time
}

// busyTimeout is how long a connection waits for another one's write lock
// (in this process or another) before giving up with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// URLForms names the database URLs Open accepts, for error messages.
const URLForms = "sqlite:PATH (a relative or absolute file path) or sqlite::memory: (a throwaway in-memory database)"

// Store is a store.Backend on one SQLite database. It is safe for concurrent use
// by many goroutines, and several Stores (in one process or several) may share
// one database file.
type Store struct {
	querier
	writeDB *sql.DB // exactly one connection; every transaction is BEGIN IMMEDIATE
	readDB  *sql.DB // read-only connections; the same pool as writeDB in memory mode
	memory  bool
	// The pools' prepared statements (one cache in memory mode).
	writeStmts, readStmts *stmtCache
}

var _ store.Backend = (*Store)(nil)

// Open opens the SQLite database that url names (see URLForms), creating the
// file if it does not exist, and checks that it can be used. It does not
// migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	path, memory, err := parsePath(url)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{memory: memory}
	if memory {
		db, err := openPool(ctx, memoryDSN(), 1)
		if err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", url, err)
		}
		s.writeDB, s.readDB = db, db
	} else {
		// The write pool opens first: its first connection creates the file
		// and switches it to WAL, which is persistent, before any reader
		// (whose connections are query_only) looks at it.
		s.writeDB, err = openPool(ctx, fileDSN(path, writeParams), 1)
		if err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", url, err)
		}
		s.readDB, err = openPool(ctx, fileDSN(path, readParams), max(4, runtime.GOMAXPROCS(0)))
		if err != nil {
			s.writeDB.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", url, err)
		}
	}
	s.writeStmts, s.readStmts = newStmtCache(s.writeDB), newStmtCache(s.readDB)
	if memory {
		s.readStmts = s.writeStmts
	}
	s.querier = querier{read: cachedDB{s.readDB, s.readStmts}, write: s.inWriteTx, now: now}
	return s, nil
}

// parsePath checks url and returns the file path it names, or memory=true.
func parsePath(url string) (path string, memory bool, err error) {
	rest, ok := strings.CutPrefix(url, "sqlite:")
	if !ok {
		return "", false, fmt.Errorf("sqlite: unsupported database URL %q: use %s", url, URLForms)
	}
	switch {
	case rest == ":memory:":
		return "", true, nil
	case rest == "":
		return "", false, fmt.Errorf("sqlite: database URL %q names no file: use %s", url, URLForms)
	case strings.HasPrefix(rest, "//"):
		// sqlite://… and sqlite:///… mean different paths in different tools;
		// refuse to guess.
		return "", false, fmt.Errorf("sqlite: database URL %q: write the file path right after the colon, as in sqlite:/var/lib/flowd.db or sqlite:flowd.db (accepted: %s)", url, URLForms)
	case strings.HasPrefix(rest, ":"):
		// Almost certainly a mistyped sqlite::memory:, not a file named ":…".
		return "", false, fmt.Errorf("sqlite: database URL %q: did you mean sqlite::memory:? (accepted: %s)", url, URLForms)
	case strings.ContainsAny(rest, "?\x00"):
		// Options are this package's business; a "?" would otherwise silently
		// become part of the file name or reach SQLite as URI parameters.
		return "", false, fmt.Errorf("sqlite: database URL %q: query parameters are not supported (accepted: %s)", url, URLForms)
	}
	return rest, false, nil
}

// The PRAGMAs every connection runs, as _pragma DSN parameters so that each
// new connection of a pool gets them (a PRAGMA run once on *sql.DB reaches
// one connection only). busy_timeout comes first so that switching a fresh
// file to WAL waits for a concurrent opener instead of failing. modernc
// silently ignores a misspelt key, so a test reads each one back.
var (
	filePragmas = []string{
		"busy_timeout(" + fmt.Sprint(busyTimeout.Milliseconds()) + ")",
		"journal_mode(WAL)",
		"foreign_keys(1)",
		"synchronous(NORMAL)",
	}
	// writeParams make every transaction BEGIN IMMEDIATE.
	writeParams = []string{"_txlock=immediate"}
	// readParams make a read connection refuse writes, so a write that ends
	// up on the read pool by mistake fails instead of racing the writer.
	readParams = []string{"_pragma=query_only(1)"}
)

// fileDSN is the modernc DSN of the database file at path. The file: URI form
// keeps any file name intact: only the characters that mean something in a
// URI are escaped (parsePath has already refused "?").
func fileDSN(path string, extra []string) string {
	escaped := strings.NewReplacer("%", "%25", "#", "%23").Replace(path)
	params := make([]string, 0, len(filePragmas)+len(extra))
	for _, p := range filePragmas {
		params = append(params, "_pragma="+p)
	}
	params = append(params, extra...)
	return "file:" + escaped + "?" + strings.Join(params, "&")
}

// memoryDSN is the DSN of a private in-memory database. WAL and synchronous
// mean nothing there; foreign keys and BEGIN IMMEDIATE keep behaviour equal to
// the file database.
func memoryDSN() string {
	return ":memory:?_pragma=busy_timeout(" + fmt.Sprint(busyTimeout.Milliseconds()) + ")&_pragma=foreign_keys(1)&_txlock=immediate"
}

// openPool opens a pool of at most conns connections that are never closed
// for age or idleness (for :memory: that would drop the database) and opens
// one connection now, so a bad path or a file that is not a database is
// reported by Open.
func openPool(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	// A query, not PingContext: opening the connection runs the PRAGMAs, and
	// reading the schema proves the file is an SQLite database.
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		db.Close()
		return nil, interpretError(ctx, err)
	}
	return db, nil
}

// inWriteTx runs fn in one BEGIN IMMEDIATE transaction on the write pool and
// commits. It is the write function of the Store's own querier: each Querier
// method called on the Store is atomic on its own.
func (s *Store) inWriteTx(ctx context.Context, fn func(c dbtx) error) error {
	return s.withWriteTx(ctx, func(tx dbtx) error { return fn(tx) })
}

// withWriteTx begins a write transaction, runs fn, and commits; fn's error
// (or a panic) rolls back and is returned unchanged.
//
// database/sql rolls the transaction back by itself if ctx ends, and its
// Rollback takes no context, so a cancelled caller cannot leave the write lock
// held: this is what context.WithoutCancel achieves on pgx.
func (s *Store) withWriteTx(ctx context.Context, fn func(tx dbtx) error) (err error) {
	// Before the transaction takes the pool's one connection.
	s.writeStmts.preparePending(ctx)
	tx, err := s.writeDB.BeginTx(ctx, nil)
	if err != nil {
		return interpretError(ctx, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback() // ErrTxDone if ctx already rolled it back
		}
	}()
	if err := fn(cachedTx{tx, s.writeStmts}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return interpretError(ctx, err)
	}
	committed = true
	return nil
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE, holding the
// database's write lock until it ends) with a querier bound to it, whose
// every write runs in a savepoint: for the store's own operations that
// need several of them at once.
func (s *Store) inTx(ctx context.Context, fn func(q *querier) error) error {
	return s.withWriteTx(ctx, func(tx dbtx) error {
		return fn(&querier{read: tx, write: inSavepoint(tx), now: s.now})
	})
}

// inSavepoint returns the write function of a querier bound to tx.
func inSavepoint(tx dbtx) func(ctx context.Context, fn func(c dbtx) error) error {
	return func(ctx context.Context, fn func(c dbtx) error) (err error) {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT flowd_op"); err != nil {
			return interpretError(ctx, err)
		}
		released := false
		defer func() {
			if !released {
				bg := context.WithoutCancel(ctx)
				_, _ = tx.ExecContext(bg, "ROLLBACK TO flowd_op")
				_, _ = tx.ExecContext(bg, "RELEASE flowd_op")
			}
		}()
		if err := fn(tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "RELEASE flowd_op"); err != nil {
			return interpretError(ctx, err)
		}
		released = true
		return nil
	}
}

// Capabilities reports SQLite's single writer and its one isolation level.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{
		Name:              "sqlite",
		ConcurrentWriters: false,
	}
}

// Ping reports whether the database file can be read. It uses the read pool,
// so it does not wait for a running write transaction (except in memory mode,
// where there is only one connection).
func (s *Store) Ping(ctx context.Context) error {
	var n int
	if err := s.readDB.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return fmt.Errorf("sqlite: ping: %w", interpretError(ctx, err))
	}
	return nil
}

// Close closes both pools. For sqlite::memory: the database is gone after it.
func (s *Store) Close() error {
	err := s.writeStmts.close()
	if s.readStmts != s.writeStmts {
		err = errors.Join(err, s.readStmts.close())
	}
	err = errors.Join(err, s.writeDB.Close())
	if s.readDB != s.writeDB {
		err = errors.Join(err, s.readDB.Close())
	}
	if err != nil {
		return fmt.Errorf("sqlite: close: %w", driverError(err))
	}
	return nil
}
