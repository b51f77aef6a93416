package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// meter reads, on a session of its own, what the database has written:
// the cluster's WAL position and the rows of this database's tables.
type meter struct {
	conn *pgx.Conn
}

func openMeter(ctx context.Context, url string) (*meter, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", redact(url), err)
	}
	return &meter{conn: conn}, nil
}

// startMeter opens a meter and reads the rows the database had written
// before the run, once no other session is connected.
func startMeter(ctx context.Context, url string) (*meter, int64, error) {
	m, err := openMeter(ctx, url)
	if err != nil {
		return nil, 0, err
	}
	rows, err := m.rowsWritten(ctx, 10*time.Second)
	if err != nil {
		m.close()
		return nil, 0, err
	}
	return m, rows, nil
}

func (m *meter) close() { _ = m.conn.Close(context.WithoutCancel(context.Background())) }

// walLSN is the cluster's current WAL insert position.
func (m *meter) walLSN(ctx context.Context) (string, error) {
	var lsn string
	if err := m.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		return "", fmt.Errorf("reading the WAL position: %w", err)
	}
	return lsn, nil
}

// walSince is how many WAL bytes the cluster has written since lsn.
func (m *meter) walSince(ctx context.Context, lsn string) (int64, error) {
	var n int64
	if err := m.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading the WAL written: %w", err)
	}
	return n, nil
}

// rowsWritten is the sum of inserted, updated and deleted rows over the
// database's user tables, once every other session of the database has
// closed. A session reports its counts to the statistics lazily (at most
// once a second while busy, within about 10 s when idle) but always before
// it ends, so only the counts read with no other session left are whole.
func (m *meter) rowsWritten(ctx context.Context, wait time.Duration) (int64, error) {
	if err := m.waitAlone(ctx, wait); err != nil {
		return 0, err
	}
	// Each statement runs in its own transaction, so the statistics
	// snapshot (cached per transaction) is a fresh one.
	var n int64
	err := m.conn.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading the rows written: %w", err)
	}
	return n, nil
}

// waitAlone waits until no session but this one is connected to the
// database.
func (m *meter) waitAlone(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var others int
		err := m.conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others)
		if err != nil {
			return fmt.Errorf("counting the database's sessions: %w", err)
		}
		if others == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d other sessions still connected to the database after %s: their row counts are not all reported", others, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
