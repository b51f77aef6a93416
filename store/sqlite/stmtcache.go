package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// stmtCache keeps the statements the store runs prepared: each text is
// prepared once on a pool (database/sql then prepares it once on each of
// the pool's connections and reuses it there, in transactions too), so
// that SQLite does not parse it again on every call. Parsing was a third
// of the CPU time of the workflow benchmark when every call prepared its
// statement anew.
//
// A statement is prepared on the pool, which takes one of its connections:
// inside a transaction of the write pool, whose only connection the
// transaction holds, that would wait for ever. So a text first seen in a
// transaction is only noted (pending) and prepared by the next
// transaction's start (preparePending), before it takes the connection.
//
// Texts of more than one statement are not cached (a prepared statement is
// one statement), nor texts beyond maxCachedStatements: a statement built
// with a variable list of placeholders (a batch of ids) has a text per
// length, and the cache must not grow with what callers send.
type stmtCache struct {
	db      *sql.DB
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool
}

// maxCachedStatements bounds a stmtCache. flowd's own statements are a few
// dozen texts.
const maxCachedStatements = 512

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// cacheable reports whether query may be cached; c.mu is held.
func (c *stmtCache) cacheable(query string) bool {
	return len(c.stmts)+len(c.pending) < maxCachedStatements && !strings.Contains(query, ";")
}

// prepared returns the prepared statement of query, or nil (then the
// caller runs the text as it is) after noting a cacheable one as pending.
func (c *stmtCache) prepared(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[query]; st != nil {
		return st
	}
	if c.cacheable(query) {
		c.pending[query] = true
	}
	return nil
}

// prepare returns the prepared statement of query, preparing it on the
// pool if it is cacheable, or nil: only where no connection of the pool
// is held.
func (c *stmtCache) prepare(ctx context.Context, query string) *sql.Stmt {
	if st := c.prepared(query); st != nil {
		return st
	}
	c.preparePending(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// preparePending prepares the pending texts on the pool: only where no
// connection of the pool is held. A text that fails to prepare (a table
// that a migration has yet to create) is dropped; it is noted again on its
// next use.
func (c *stmtCache) preparePending(ctx context.Context) {
	c.mu.Lock()
	queries := make([]string, 0, len(c.pending))
	for query := range c.pending {
		queries = append(queries, query)
		delete(c.pending, query)
	}
	c.mu.Unlock()
	// Not under c.mu: preparing waits for a connection of the pool, which
	// a transaction may hold while it looks statements up.
	for _, query := range queries {
		st, err := c.db.PrepareContext(ctx, query)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts[query] == nil {
			c.stmts[query] = st
			st = nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close() // another caller prepared it meanwhile
		}
	}
}

// close closes the cached statements.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for query, st := range c.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(c.stmts, query)
	}
	return first
}

// cachedDB runs statements on a pool through its cache, preparing them on
// first use: no connection of the pool is held meanwhile.
type cachedDB struct {
	*sql.DB
	cache *stmtCache
}

func (c cachedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st := c.cache.prepare(ctx, query)
	if st == nil {
		return c.DB.ExecContext(ctx, query, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (c cachedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st := c.cache.prepare(ctx, query)
	if st == nil {
		return c.DB.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (c cachedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st := c.cache.prepare(ctx, query)
	if st == nil {
		return c.DB.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// cachedTx runs statements in a transaction through the cache of its pool:
// a statement prepared on the transaction's connection before is reused;
// one not prepared yet runs as text and is prepared by the pool's next
// transaction (stmtCache.preparePending).
type cachedTx struct {
	*sql.Tx
	cache *stmtCache
}

func (c cachedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st := c.cache.prepared(query)
	if st == nil {
		return c.Tx.ExecContext(ctx, query, args...)
	}
	return c.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

func (c cachedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st := c.cache.prepared(query)
	if st == nil {
		return c.Tx.QueryContext(ctx, query, args...)
	}
	return c.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
}

func (c cachedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st := c.cache.prepared(query)
	if st == nil {
		return c.Tx.QueryRowContext(ctx, query, args...)
	}
	return c.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
}
