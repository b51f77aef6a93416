-- Published events (POST /v1/events). An event completes the wait steps
-- waiting for it when it is published, and is kept so that a wait step
-- that starts waiting later still takes it: such a step takes the oldest
-- event of its queue created since its instance was (and within the event
-- retention), through the (queue, created_at, id) index. queue is the
-- queue of the waiting steps' tasks ('flowd:event/' || name || '/' || key),
-- stored so that both look-ups are index equalities. The sweeper deletes
-- expired events through the created_at index.
-- A waiting step's task stays QUEUED in its event queue, which no worker
-- claims; the sweeper's safety net reads those tasks through their own
-- partial index (so its scan does not grow with the other queued tasks).
-- (Numbered 00011: 00009 and 00010 are other migrations of the same
-- release.)

-- +goose Up
CREATE TABLE workflow_events (
    id         text        PRIMARY KEY,
    name       text        NOT NULL CHECK (name <> ''),
    key        text        NOT NULL,
    queue      text        NOT NULL,
    data       jsonb       NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX workflow_events_queue_created_at_idx ON workflow_events (queue, created_at, id);
CREATE INDEX workflow_events_created_at_idx ON workflow_events (created_at);
CREATE INDEX workflow_tasks_event_waits_idx ON workflow_tasks (updated_at)
    WHERE status = 'QUEUED' AND queue LIKE 'flowd:event/%';

-- +goose Down
DROP INDEX workflow_tasks_event_waits_idx;
DROP TABLE workflow_events;
