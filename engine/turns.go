package engine

import (
	"context"
	"sync"
)

// turns are this node's turns at deciding about one instance. A decision
// is one guarded write made after its reads, outside any transaction (a
// decision may evaluate programs for a second), so any write of the
// instance in between makes it miss; a stream of quick writers (PATCH with
// If-Match: *, each deciding in no time) could win every such race against
// a slow decision. Taking turns makes the node's writers of one instance
// queue instead: a decision is read, made and written in its turn.
//
// On a store whose writers are serialised (SQLite) every decision about a
// known instance takes its turn. On one with concurrent writers
// (PostgreSQL) decisions race as equals until one has lost
// lockAfterConflicts races; it then takes the turn, and so does every
// decision of the node about that instance while anyone holds or waits for
// it (busy), so the stream queues behind it. A turn is waited for in
// arrival order and never while a transaction is open, and a holder never
// waits for another turn.
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

// busy reports whether a decision of the node holds or waits for the turn
// of instance id.
func (ts *turns) busy(id string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.m[id] != nil
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
