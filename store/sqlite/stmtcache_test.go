package sqlite

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// cached reports whether c holds a prepared statement of query.
func (c *stmtCache) cached(query string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query] != nil
}

// A statement read on the pool is prepared at its first use; one first
// run in a write transaction runs as text and is prepared before the next
// write transaction takes the pool's one connection. Texts of several
// statements are never cached.
func TestStatementsArePreparedOnce(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	ctx := t.Context()
	const read = `SELECT count(*) FROM workflow_instances WHERE status = ?1`
	var n int
	if err := s.read.QueryRowContext(ctx, read, "RUNNING").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if !s.readStmts.cached(read) {
		t.Errorf("a read on the pool did not prepare its statement")
	}
	const write = `UPDATE workflow_instances SET version = version WHERE id = ?1`
	tx := func() {
		t.Helper()
		if err := s.inWriteTx(ctx, func(c dbtx) error {
			_, err := c.ExecContext(ctx, write, "none")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	tx()
	if s.writeStmts.cached(write) {
		t.Errorf("a statement was prepared inside the write transaction, on the connection it holds")
	}
	tx()
	if !s.writeStmts.cached(write) {
		t.Errorf("the next write transaction did not prepare the statement the one before ran")
	}
	const two = `SELECT 1; SELECT 2`
	if _, err := s.read.ExecContext(ctx, two); err != nil {
		t.Fatal(err)
	}
	if s.readStmts.cached(two) {
		t.Errorf("a text of two statements was cached")
	}
}

// The cache stops growing at its bound: texts beyond it run as text.
func TestStatementCacheIsBounded(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	ctx := t.Context()
	for i := range maxCachedStatements + 10 {
		q := fmt.Sprintf("SELECT %d", i)
		var n int
		if err := s.read.QueryRowContext(ctx, q).Scan(&n); err != nil || n != i {
			t.Fatalf("%s = %d, %v", q, n, err)
		}
	}
	s.readStmts.mu.Lock()
	size := len(s.readStmts.stmts) + len(s.readStmts.pending)
	s.readStmts.mu.Unlock()
	if size > maxCachedStatements {
		t.Errorf("the cache holds %d statements, more than its bound %d", size, maxCachedStatements)
	}
}

// Writers and readers that meet new statements at once never wait for
// each other for ever: a statement is prepared on the write pool only
// outside its transactions, and the cache's lock is not held meanwhile.
func TestStatementCacheUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				// A new text now and then, and the same ones again.
				q := fmt.Sprintf("UPDATE workflow_instances SET version = version WHERE id = ?1 AND %d = %d", i%5, i%5)
				if err := s.inWriteTx(ctx, func(c dbtx) error {
					_, err := c.ExecContext(ctx, q, fmt.Sprint(w))
					return err
				}); err != nil {
					errs <- err
					return
				}
				var n int
				r := strings.Replace(q, "UPDATE workflow_instances SET version = version", "SELECT count(*) FROM workflow_instances", 1)
				if err := s.read.QueryRowContext(ctx, r, fmt.Sprint(w)).Scan(&n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
