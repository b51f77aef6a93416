package metrics

import "sync/atomic"

// storageHealth remembers whether the database ran out of space: set by a
// write that failed with store.ErrStorageFull, cleared by the next write
// that stored something (store/observed sees every write of the server).
type storageHealth struct {
	full atomic.Bool
}

// SetStorageFull records whether the last write that settled it failed for
// lack of space (true) or stored something (false): what
// flowd_storage_full and StorageFull report.
func (m *Metrics) SetStorageFull(full bool) { m.storage.full.Store(full) }

// StorageFull reports whether the last write that settled it failed with
// store.ErrStorageFull: no write has stored anything since.
func (m *Metrics) StorageFull() bool { return m.storage.full.Load() }
