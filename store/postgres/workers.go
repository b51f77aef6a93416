package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
)

// Workers seen polling (store.WorkerStore).

var _ store.WorkerStore = (*Store)(nil)

const (
	recordWorkerSQL = `INSERT INTO workers (worker, node, handlers, last_poll_at) VALUES ($1, $2, $3::text::jsonb, $4)
ON CONFLICT (worker, node) DO UPDATE SET handlers = excluded.handlers, last_poll_at = excluded.last_poll_at`

	// Names are ordered bytewise, as SQLite and Go do.
	// In flight: the LEASED tasks, few, counted by the worker their lease
	// names.
	listWorkersSQL = `SELECT w.worker, w.node, w.handlers, w.last_poll_at, COALESCE(c.n, 0)::int FROM workers w
LEFT JOIN (SELECT lease_owner, count(*) AS n FROM workflow_tasks WHERE status = 'LEASED' GROUP BY lease_owner) c
ON c.lease_owner = w.worker
WHERE w.last_poll_at >= $1
ORDER BY w.last_poll_at DESC, w.worker COLLATE "C", w.node COLLATE "C"`

	deleteWorkersSQL = `DELETE FROM workers WHERE last_poll_at < $1`
)

// RecordWorker replaces the row of (w.Worker, w.Node).
func (s *Store) RecordWorker(ctx context.Context, w store.WorkerRecord) error {
	if err := w.Normalize(); err != nil {
		return err
	}
	handlers, err := json.Marshal(w.Handlers)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, recordWorkerSQL, w.Worker, w.Node, string(handlers), w.LastPollAt)
	return commitOutcome(interpretError(err, ""))
}

// ListWorkers returns the workers that polled at or after since, the most
// recent poll first, then by worker and node.
func (s *Store) ListWorkers(ctx context.Context, since time.Time) ([]store.WorkerRecord, error) {
	rows, err := s.pool.Query(ctx, listWorkersSQL, store.Timestamp(since))
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	ws := []store.WorkerRecord{}
	for rows.Next() {
		var (
			w        store.WorkerRecord
			handlers []byte
		)
		if err := rows.Scan(&w.Worker, &w.Node, &handlers, &w.LastPollAt, &w.InFlight); err != nil {
			return nil, interpretError(err, "")
		}
		if err := json.Unmarshal(handlers, &w.Handlers); err != nil {
			return nil, fmt.Errorf("worker %q: stored handlers: %w", w.Worker, err)
		}
		w.LastPollAt = w.LastPollAt.UTC()
		ws = append(ws, w)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return ws, nil
}

// deleteWorkersBefore deletes the workers whose last poll is before t.
func (s *Store) deleteWorkersBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteWorkersSQL, t)
	if err != nil {
		return 0, commitOutcome(interpretError(err, ""))
	}
	return int(tag.RowsAffected()), nil
}
