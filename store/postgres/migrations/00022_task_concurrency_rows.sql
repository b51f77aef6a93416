-- Step concurrency keys and rate buckets as rows written with a guard.
-- task_concurrency holds, per step concurrency key, how many of its tasks
-- are LEASED. The rule of what a write does to it is Go's
-- (store.LeasedChanges); every write that leases a task of a key or moves
-- one out of LEASED applies its change to the key's row in the same
-- transaction, guarded (within the limit for a lease, never below zero),
-- so that no advisory lock and no count of the tasks is needed. The counts
-- start from the tasks in flight; the index that counted them goes.
-- flowd_rate_buckets gains next_token_at, when a bucket holds a token
-- again, written by the claim that takes tokens (NULL for a bucket written
-- before: the claim reads it and decides).

-- +goose Up
CREATE TABLE task_concurrency (
    key    text   PRIMARY KEY,
    leased bigint NOT NULL
);

INSERT INTO task_concurrency (key, leased)
SELECT concurrency_key, count(*)
FROM workflow_tasks
WHERE status = 'LEASED' AND concurrency_key IS NOT NULL
GROUP BY concurrency_key;

DROP INDEX workflow_tasks_concurrency_idx;

ALTER TABLE flowd_rate_buckets ADD COLUMN next_token_at timestamptz;

-- +goose Down
ALTER TABLE flowd_rate_buckets DROP COLUMN next_token_at;
CREATE INDEX workflow_tasks_concurrency_idx ON workflow_tasks (concurrency_key)
    WHERE status = 'LEASED' AND concurrency_key IS NOT NULL;
DROP TABLE task_concurrency;
