package engine

import (
	"context"
	"sync"
)

// turns are this node's turns at deciding about one instance, on a store
// whose writers are serialised (SQLite). There the engine reads and decides
// outside the write transaction — a decision may evaluate programs for a
// second, and the database has one writer — so a decision is one guarded
// write made after its reads, and any write of the instance in between makes
// it miss. A writer that always holds the write lock from its read to its
// write (a PATCH with If-Match: *) would win every such race; taking turns
// makes the node's writers of one instance queue instead: a decision is read,
// made and written in its turn, and the locked writes of the API wait for the
// turn before they take the write lock. A turn is waited for in arrival order
// and never while a transaction is open (the turn's holder needs the write
// lock to finish), and a holder never waits for another turn.
type turns struct {
	mu sync.Mutex
	m  map[string]*turn
}

// turn is one instance's: token holds a value while nobody has the turn;
// users counts its holder and waiters, so that the entry is dropped with the
// last of them.
type turn struct {
	token chan struct{}
	users int
}

// take waits for the turn of instance id and returns the function that ends
// it; it fails only when ctx ends first.
func (ts *turns) take(ctx context.Context, id string) (release func(), err error) {
	ts.mu.Lock()
	if ts.m == nil {
		ts.m = map[string]*turn{}
	}
	t := ts.m[id]
	if t == nil {
		t = &turn{token: make(chan struct{}, 1)}
		t.token <- struct{}{}
		ts.m[id] = t
	}
	t.users++
	ts.mu.Unlock()
	select {
	case <-t.token:
		return func() { ts.leave(id, t, true) }, nil
	case <-ctx.Done():
		ts.leave(id, t, false)
		return nil, ctx.Err()
	}
}

// leave ends a holder's turn (held) or a waiter's wait.
func (ts *turns) leave(id string, t *turn, held bool) {
	if held {
		// Handed to the longest waiter, if there is one: a channel's
		// receivers are served in the order they came.
		t.token <- struct{}{}
	}
	ts.mu.Lock()
	if t.users--; t.users == 0 {
		delete(ts.m, id)
	}
	ts.mu.Unlock()
}
