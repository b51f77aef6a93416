-- Flow control of tasks, the same logical shape as the PostgreSQL
-- migration 00014: an instance's priority (0 for a free-form instance),
-- copied onto its tasks; a task's concurrency key and limit and its rate
-- limit (NULL key: none); the claim index by queue, priority and run_at;
-- the leased tasks of a concurrency key; one token bucket per rate key.
-- (Numbered 00012: 00011 and 00013 belong to the other flow-control features.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

ALTER TABLE workflow_tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 3;
ALTER TABLE workflow_tasks ADD COLUMN concurrency_key TEXT;
ALTER TABLE workflow_tasks ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_tasks ADD COLUMN rate_key TEXT;
ALTER TABLE workflow_tasks ADD COLUMN rate_per_second REAL NOT NULL DEFAULT 0;
ALTER TABLE workflow_tasks ADD COLUMN rate_burst INTEGER NOT NULL DEFAULT 0;

DROP INDEX workflow_tasks_claim_idx;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, priority, run_at) WHERE status = 'QUEUED';
CREATE INDEX workflow_tasks_concurrency_idx ON workflow_tasks (concurrency_key)
    WHERE status = 'LEASED' AND concurrency_key IS NOT NULL;

CREATE TABLE flowd_rate_buckets (
    key        TEXT PRIMARY KEY,
    tokens     REAL NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE flowd_rate_buckets;
DROP INDEX workflow_tasks_concurrency_idx;
DROP INDEX workflow_tasks_claim_idx;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, run_at) WHERE status = 'QUEUED';
ALTER TABLE workflow_tasks DROP COLUMN rate_burst;
ALTER TABLE workflow_tasks DROP COLUMN rate_per_second;
ALTER TABLE workflow_tasks DROP COLUMN rate_key;
ALTER TABLE workflow_tasks DROP COLUMN concurrency_limit;
ALTER TABLE workflow_tasks DROP COLUMN concurrency_key;
ALTER TABLE workflow_tasks DROP COLUMN priority;
ALTER TABLE workflow_instances DROP COLUMN priority;
