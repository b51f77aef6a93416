package sqlite

import (
	"context"
	"fmt"
	"strconv"
)

// SetMaxPageCount caps how many pages the database file may hold (PRAGMA
// max_page_count on the write connection, which every write uses) and returns
// the cap SQLite applied: never below the file's current size. A write that
// would grow the file past it fails with store.ErrStorageFull, exactly as on
// a full disk, which is what tests use it for; SQLite's own maximum lifts the
// cap again. It lasts as long as the write connection, which the Store keeps
// open.
func (s *Store) SetMaxPageCount(ctx context.Context, pages int64) (int64, error) {
	if pages < 1 {
		return 0, fmt.Errorf("sqlite: max page count %d: must be at least 1", pages)
	}
	// A PRAGMA takes no bound parameters; the text holds a formatted
	// integer only.
	var applied int64
	if err := s.writeDB.QueryRowContext(ctx, "PRAGMA max_page_count = "+strconv.FormatInt(pages, 10)).Scan(&applied); err != nil {
		return 0, fmt.Errorf("sqlite: set max_page_count: %w", interpretError(ctx, err))
	}
	return applied, nil
}
