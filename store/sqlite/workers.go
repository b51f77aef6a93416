package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
)

// Workers seen polling (store.WorkerStore).

var _ store.WorkerStore = (*Store)(nil)

// RecordWorker replaces the row of (w.Worker, w.Node).
func (q *querier) RecordWorker(ctx context.Context, w store.WorkerRecord) error {
	if err := w.Normalize(); err != nil {
		return err
	}
	handlers, err := json.Marshal(w.Handlers)
	if err != nil {
		return err
	}
	return q.write(ctx, func(c dbtx) error {
		_, err := c.ExecContext(ctx,
			`INSERT INTO workers (worker, node, handlers, last_poll_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (worker, node) DO UPDATE SET handlers = excluded.handlers, last_poll_at = excluded.last_poll_at`,
			w.Worker, w.Node, string(handlers), micros(w.LastPollAt))
		return interpretError(ctx, err)
	})
}

// ListWorkers returns the workers that polled at or after since, the most
// recent poll first, then by worker and node (bytewise, as on PostgreSQL),
// with the tasks leased to each (the leased tasks are few: the join reads
// them through the partial index on LEASED tasks).
func (q *querier) ListWorkers(ctx context.Context, since time.Time) ([]store.WorkerRecord, error) {
	rows, err := q.read.QueryContext(ctx,
		`SELECT w.worker, w.node, w.handlers, w.last_poll_at, COALESCE(c.n, 0) FROM workers w
		LEFT JOIN (SELECT lease_owner, count(*) AS n FROM workflow_tasks WHERE status = 'LEASED' GROUP BY lease_owner) c
		ON c.lease_owner = w.worker
		WHERE w.last_poll_at >= ?1
		ORDER BY w.last_poll_at DESC, w.worker, w.node`, micros(since))
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	ws := []store.WorkerRecord{}
	for rows.Next() {
		var (
			w        store.WorkerRecord
			handlers string
			at       int64
		)
		if err := rows.Scan(&w.Worker, &w.Node, &handlers, &at, &w.InFlight); err != nil {
			return nil, interpretError(ctx, err)
		}
		if err := json.Unmarshal([]byte(handlers), &w.Handlers); err != nil {
			return nil, fmt.Errorf("worker %q: stored handlers: %w", w.Worker, err)
		}
		w.LastPollAt = fromMicros(at)
		ws = append(ws, w)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return ws, nil
}

// deleteWorkersBefore deletes the workers whose last poll is before t.
func (q *querier) deleteWorkersBefore(ctx context.Context, t time.Time) (int, error) {
	var n int64
	err := q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx, `DELETE FROM workers WHERE last_poll_at < ?1`, micros(t))
		if err != nil {
			return interpretError(ctx, err)
		}
		n, err = res.RowsAffected()
		return interpretError(ctx, err)
	})
	return int(n), err
}
