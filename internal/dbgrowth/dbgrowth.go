// Package dbgrowth reads how many bytes a database has written so far, so
// that flowd bench can report what a run cost in writes: on PostgreSQL the
// write-ahead log's position, whose difference over a run is the WAL it
// wrote (cluster-wide: run it on a cluster of its own); on SQLite the size
// of the database file and its -wal file, whose growth approximates what
// a run added (pages freed and reused, or WAL frames written over after a
// checkpoint, do not show).
package dbgrowth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/dsn"
)

// ErrNotMeasured is returned by Open for a database whose writes cannot
// be read from outside: SQLite in memory, or an unknown URL.
var ErrNotMeasured = errors.New("the database's writes are not measured")

// Meter reads one database's written bytes; Close it when done. It is not
// safe for concurrent use.
type Meter struct {
	conn *pgx.Conn // PostgreSQL
	path string    // SQLite
}

// Open returns the meter of the database url names, as storeopen names
// databases: postgres:// or postgresql://, or sqlite:PATH.
func Open(ctx context.Context, url string) (*Meter, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return nil, dsn.RedactError(fmt.Errorf("dbgrowth: connecting to read the WAL position: %w", err), url)
		}
		return &Meter{conn: conn}, nil
	case url == "sqlite::memory:":
		return nil, fmt.Errorf("%w: an in-memory SQLite database has no file", ErrNotMeasured)
	case strings.HasPrefix(url, "sqlite:"):
		return &Meter{path: strings.TrimPrefix(url, "sqlite:")}, nil
	}
	return nil, fmt.Errorf("%w: unsupported database URL %q", ErrNotMeasured, dsn.Redact(url))
}

// IsWAL reports whether Written is PostgreSQL's WAL position; otherwise
// it is the size of SQLite's files.
func (m *Meter) IsWAL() bool { return m.conn != nil }

// walPositionSQL is the current WAL position in bytes from the start of
// the log: the difference of two readings is the WAL written between them.
const walPositionSQL = `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`

// Written returns the database's written bytes so far: the WAL position on
// PostgreSQL, the size of the database file and its -wal file on SQLite.
func (m *Meter) Written(ctx context.Context) (int64, error) {
	if m.conn != nil {
		var pos int64
		if err := m.conn.QueryRow(ctx, walPositionSQL).Scan(&pos); err != nil {
			return 0, fmt.Errorf("dbgrowth: reading the WAL position: %w", err)
		}
		return pos, nil
	}
	var size int64
	for _, p := range []string{m.path, m.path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("dbgrowth: %w", err)
		}
		size += fi.Size()
	}
	return size, nil
}

// Close releases the meter's connection, if it has one.
func (m *Meter) Close() error {
	if m.conn == nil {
		return nil
	}
	return m.conn.Close(context.Background())
}
