-- Flow control of tasks: an instance's priority (0 for a free-form
-- instance), copied onto its tasks; a task's concurrency key and limit
-- (NULL key: none) and its rate limit (NULL key: none), written when the
-- task is inserted. The claim index leads with the priority so that each
-- (queue, priority) is one ordered range of due tasks; the concurrency
-- index counts the leased tasks of a key. flowd_rate_buckets holds one
-- token bucket per rate-limit key, shared by every node.
-- (Numbered 00014: 00013 and 00015 belong to the other flow-control features.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN priority smallint NOT NULL DEFAULT 0;

ALTER TABLE workflow_tasks
    ADD COLUMN priority          smallint NOT NULL DEFAULT 3,
    ADD COLUMN concurrency_key   text,
    ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0,
    ADD COLUMN rate_key          text,
    ADD COLUMN rate_per_second   double precision NOT NULL DEFAULT 0,
    ADD COLUMN rate_burst        integer NOT NULL DEFAULT 0;

DROP INDEX workflow_tasks_claim_idx;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, priority, run_at) WHERE status = 'QUEUED';
CREATE INDEX workflow_tasks_concurrency_idx ON workflow_tasks (concurrency_key)
    WHERE status = 'LEASED' AND concurrency_key IS NOT NULL;

CREATE TABLE flowd_rate_buckets (
    key        text PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE flowd_rate_buckets;
DROP INDEX workflow_tasks_concurrency_idx;
DROP INDEX workflow_tasks_claim_idx;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, run_at) WHERE status = 'QUEUED';
ALTER TABLE workflow_tasks
    DROP COLUMN rate_burst,
    DROP COLUMN rate_per_second,
    DROP COLUMN rate_key,
    DROP COLUMN concurrency_limit,
    DROP COLUMN concurrency_key,
    DROP COLUMN priority;
ALTER TABLE workflow_instances DROP COLUMN priority;
