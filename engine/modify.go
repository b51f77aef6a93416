package engine

import (
	"context"

	"github.com/flowd/flowd/workflow"
)

// ModifyState is the store's locked read-modify-write of an instance's
// state (store.Querier.ModifyState: the API's PATCH with If-Match: *). On a
// store with one writer (SQLite) it waits for this node's turn for the
// instance first (turns.go): a write that holds the write lock from its read
// to its write must not slip between the read and the write of an engine
// decision about the same instance, which would make that decision miss
// every time under a stream of such writes.
func (e *Engine) ModifyState(ctx context.Context, id string, fn func(*workflow.Instance) error, cause string) (*workflow.Instance, error) {
	if !e.st.Capabilities().ConcurrentWriters {
		release, err := e.turns.take(ctx, id)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return e.st.ModifyState(ctx, id, fn, cause)
}
