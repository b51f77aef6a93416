package store

import "context"

// HistorySizer reports what an instance's history takes in the database:
// what `flowd bench --scenario history` measures and the tests of the
// storage bound check. Both stores implement it.
type HistorySizer interface {
	// HistorySize measures the history rows of instance id and its
	// current state. ErrNotFound when there is no such instance.
	HistorySize(ctx context.Context, id string) (HistorySize, error)
}

// HistorySize is measured from the stored rows. Bytes are those of the
// columns as text: a state's JSON text (on PostgreSQL as jsonb writes it
// out), the status and the cause; the fixed-size columns (version, at) and
// the database's own row and page overhead are not counted.
type HistorySize struct {
	// Versions is the number of history rows, Snapshots how many of them
	// hold a whole state (the others a patch).
	Versions, Snapshots int64
	// Bytes is the history rows' size, StateBytes the instance's current
	// state's text.
	Bytes, StateBytes int64
}
