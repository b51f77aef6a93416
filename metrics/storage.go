package metrics

import (
	"errors"
	"sync/atomic"

	"github.com/flowd/flowd/store"
)

// storageHealth remembers whether the database ran out of space: set by a
// write that failed with store.ErrStorageFull, cleared by the next write
// that stored something. Every write of the server passes the instrumented
// store, so this is the one place that sees them all.
type storageHealth struct {
	full atomic.Bool
}

// txWrites collects, inside one WithTx, whether a statement stored
// something: that counts as a successful write only once the transaction
// has committed.
type txWrites struct {
	wrote atomic.Bool
	// deleted counts the instances deleted in the transaction, added to
	// flowd_workflows_deleted_total once it has committed.
	deleted atomic.Int64
}

// noteWrite records the outcome of a write. wrote says whether a successful
// one stored anything: an empty claim or sweep proves nothing about space,
// and the engine runs those all the time.
func (q instrumentedQuerier) noteWrite(err error, wrote bool) {
	switch {
	case errors.Is(err, store.ErrStorageFull):
		q.m.storage.full.Store(true)
	case err != nil || !wrote:
	case q.tx != nil:
		q.tx.wrote.Store(true)
	default:
		q.m.storage.full.Store(false)
	}
}

// StorageFull reports whether the last write that settled it failed with
// store.ErrStorageFull: no write has stored anything since. /healthz answers
// 503 while it holds.
func (s *instrumentedStore) StorageFull() bool { return s.m.storage.full.Load() }

var _ store.StorageReporter = (*instrumentedStore)(nil)
