package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/store"
)

// PublishEvent stores e; see store.EventStore.
func (q *querier) PublishEvent(ctx context.Context, e *store.Event) error {
	if err := store.CheckEvent(e); err != nil {
		return err
	}
	var data bytes.Buffer
	if err := json.Compact(&data, e.Data); err != nil {
		return fmt.Errorf("%w: event data: %w", store.ErrInvalidArgument, err)
	}
	now := q.timestamp()
	err := q.write(ctx, func(c dbtx) error {
		_, err := c.ExecContext(ctx, `INSERT INTO workflow_events (id, name, key, queue, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
			e.ID, e.Name, e.Key, e.Queue(), data.String(), now)
		return interpretError(ctx, err)
	})
	if err != nil {
		return err
	}
	e.Data, e.CreatedAt = json.RawMessage(data.String()), fromMicros(now)
	return nil
}

// oldestEvent returns the oldest event of queue created at or after since,
// or ErrNotFound.
func (q *querier) oldestEvent(ctx context.Context, queue string, since time.Time) (*store.Event, error) {
	var (
		e       store.Event
		data    string
		created int64
	)
	err := q.read.QueryRowContext(ctx, `SELECT id, name, key, data, created_at FROM workflow_events
		WHERE queue = ?1 AND created_at >= ?2 ORDER BY created_at, id LIMIT 1`, queue, micros(since)).
		Scan(&e.ID, &e.Name, &e.Key, &data, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("no event of queue %q since %s: %w", queue, since.Format(time.RFC3339Nano), store.ErrNotFound)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	e.Data, e.CreatedAt = json.RawMessage(data), fromMicros(created)
	return &e, nil
}

// deleteEventsBefore deletes at most limit events created before t, oldest
// first (checked by store.PruneParams.Check).
func (q *querier) deleteEventsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int64
	err := q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx, `DELETE FROM workflow_events WHERE id IN (
			SELECT id FROM workflow_events WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)`, micros(t), limit)
		if err != nil {
			return interpretError(ctx, err)
		}
		n, err = res.RowsAffected()
		return interpretError(ctx, err)
	})
	return int(n), err
}

// queuedTasks returns the QUEUED tasks of queue through the claim index.
func (q *querier) queuedTasks(ctx context.Context, queue string, limit int) ([]*store.Task, error) {
	return queryTasks(ctx, q.read, `SELECT `+taskColumns+` FROM workflow_tasks
		WHERE status = 'QUEUED' AND queue = ?1 ORDER BY run_at LIMIT ?2`, queue, limit)
}

// tasksWithEventsSQL reads the waiting tasks through their partial index
// (the same LIKE as its WHERE, so that the planner uses it) and looks up an
// event for each through the (queue, created_at, id) index. ?1 is since,
// ?2 writtenBefore, ?3 the limit.
var tasksWithEventsSQL = `SELECT ` + qualify("t", taskColumns) + ` FROM workflow_tasks t
	JOIN workflow_instances i ON i.id = t.instance_id
	WHERE t.status = 'QUEUED' AND t.queue LIKE 'flowd:event/%' AND t.updated_at < ?2
	  AND EXISTS (SELECT 1 FROM workflow_events e WHERE e.queue = t.queue AND e.created_at >= max(i.created_at, ?1))
	ORDER BY t.updated_at LIMIT ?3`

// tasksWithEvents returns waiting tasks that an event could complete.
func (q *querier) tasksWithEvents(ctx context.Context, since, writtenBefore time.Time, limit int) ([]*store.Task, error) {
	return queryTasks(ctx, q.read, tasksWithEventsSQL, micros(since), micros(writtenBefore), limit)
}
