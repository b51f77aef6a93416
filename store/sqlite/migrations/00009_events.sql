-- Published events, the same logical shape as the PostgreSQL migration
-- 00011: one row per event, created_at in unix microseconds, queue the
-- queue of the waiting steps' tasks ('flowd:event/' || name || '/' || key)
-- so that a late waiter's look-up of the oldest event of its queue and the
-- publish's look-up of the waiting tasks are index equalities. The
-- sweeper deletes expired events through the created_at index, and its
-- safety net reads the waiting tasks through their own partial index.
-- (Numbered 00009: 00007 and 00008 are other migrations of the same
-- release.)

-- +goose Up
CREATE TABLE workflow_events (
    id         TEXT    NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL CHECK (name <> ''),
    key        TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    data       TEXT    NOT NULL CHECK (json_valid(data)),
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX workflow_events_queue_created_at_idx ON workflow_events (queue, created_at, id);
CREATE INDEX workflow_events_created_at_idx ON workflow_events (created_at);
CREATE INDEX workflow_tasks_event_waits_idx ON workflow_tasks (updated_at)
    WHERE status = 'QUEUED' AND queue LIKE 'flowd:event/%';

-- +goose Down
DROP INDEX workflow_tasks_event_waits_idx;
DROP TABLE workflow_events;
