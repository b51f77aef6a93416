package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
)

// PublishEvent stores e; see store.EventStore.
func (q *querier) PublishEvent(ctx context.Context, e *store.Event) error {
	if err := store.CheckEvent(e); err != nil {
		return err
	}
	if err := checkJSON("event data", e.Data); err != nil {
		return err
	}
	now := store.Timestamp(q.now())
	var data []byte
	err := q.db.QueryRow(ctx, `INSERT INTO workflow_events (id, name, key, queue, data, created_at)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING data`,
		e.ID, e.Name, e.Key, e.Queue(), string(e.Data), now).Scan(&data)
	if err != nil {
		return interpretEventError(err, e.ID)
	}
	e.Data, e.CreatedAt = data, now
	return nil
}

// interpretEventError maps the errors of a statement on events: a taken
// id is ErrExists naming the event, not a workflow.
func interpretEventError(err error, id string) error {
	err = interpretError(err, "")
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("event %q: %w", id, store.ErrExists)
	}
	return err
}

// oldestEvent returns the oldest event of queue created at or after since,
// or ErrNotFound.
func (q *querier) oldestEvent(ctx context.Context, queue string, since time.Time) (*store.Event, error) {
	notFound := fmt.Errorf("no event of queue %q since %s: %w", queue, since.Format(time.RFC3339Nano), store.ErrNotFound)
	if !storableText(queue) {
		return nil, notFound
	}
	var e store.Event
	var data []byte
	err := q.db.QueryRow(ctx, `SELECT id, name, key, data, created_at FROM workflow_events
		WHERE queue = $1 AND created_at >= $2 ORDER BY created_at, id LIMIT 1`, queue, store.Timestamp(since)).
		Scan(&e.ID, &e.Name, &e.Key, &data, &e.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, interpretError(err, "")
	}
	e.Data, e.CreatedAt = data, store.Timestamp(e.CreatedAt)
	return &e, nil
}

// deleteEventsSQL deletes a batch of expired events; SKIP LOCKED keeps the
// sweepers of several nodes from waiting for each other.
const deleteEventsSQL = `DELETE FROM workflow_events WHERE id = ANY (ARRAY(
	SELECT id FROM workflow_events WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

// deleteEventsBefore deletes at most limit events created before t
// (checked by store.PruneParams.Check).
func (q *querier) deleteEventsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	tag, err := q.db.Exec(ctx, deleteEventsSQL, t, limit)
	if err != nil {
		return 0, interpretError(err, "")
	}
	return int(tag.RowsAffected()), nil
}

// queuedTasks returns the QUEUED tasks of queue through the claim index.
func (q *querier) queuedTasks(ctx context.Context, queue string, limit int) ([]*store.Task, error) {
	if !storableText(queue) {
		return []*store.Task{}, nil
	}
	return q.queryTasks(ctx, `SELECT `+taskColumns+` FROM workflow_tasks
		WHERE status = 'QUEUED' AND queue = $1 ORDER BY run_at LIMIT $2`, queue, limit)
}

// tasksWithEventsSQL reads the waiting tasks through their partial index
// (the same LIKE as its predicate, so that the planner can use it) and
// looks up an event for each through the (queue, created_at, id) index.
// $1 is since, $2 writtenBefore, $3 the limit.
const tasksWithEventsSQL = `SELECT ` + taskPrefixedColumns + ` FROM workflow_tasks t
	JOIN workflow_instances i ON i.id = t.instance_id
	WHERE t.status = 'QUEUED' AND t.queue LIKE 'flowd:event/%' AND t.updated_at < $2
	  AND EXISTS (SELECT 1 FROM workflow_events e WHERE e.queue = t.queue AND e.created_at >= greatest(i.created_at, $1))
	ORDER BY t.updated_at LIMIT $3`

// tasksWithEvents returns waiting tasks that an event could complete.
func (q *querier) tasksWithEvents(ctx context.Context, since, writtenBefore time.Time, limit int) ([]*store.Task, error) {
	return q.queryTasks(ctx, tasksWithEventsSQL, store.Timestamp(since), store.Timestamp(writtenBefore), limit)
}
