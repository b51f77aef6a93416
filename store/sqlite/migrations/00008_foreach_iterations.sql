-- A foreach step runs one task per item: the task rows of one step are told
-- apart by their iteration (0 for a step without foreach, the item's index
-- plus one for an iteration), and a step has at most one row per iteration,
-- so a retry still re-queues the same row and no iteration is scheduled
-- twice. SQLite cannot change a UNIQUE constraint: the table is rebuilt.

-- +goose Up
-- The column is added first: should another process have applied this
-- migration meanwhile, this fails, and Migrate sees that it lost the race
-- instead of rebuilding the table a second time.
ALTER TABLE workflow_tasks ADD COLUMN iteration INTEGER NOT NULL DEFAULT 0 CHECK (iteration >= 0);
CREATE TABLE workflow_tasks_new (
    id               TEXT    NOT NULL PRIMARY KEY,
    instance_id      TEXT    NOT NULL REFERENCES workflow_instances (id),
    step_id          TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('QUEUED', 'LEASED', 'DONE', 'FAILED', 'CANCELLED')),
    attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    run_at           INTEGER NOT NULL,
    lease            TEXT    NOT NULL DEFAULT '',
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      INTEGER,
    attempt_deadline INTEGER,
    input            TEXT    NOT NULL CHECK (json_valid(input)),
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    iteration        INTEGER NOT NULL DEFAULT 0 CHECK (iteration >= 0),
    -- At most one task per step and iteration: a retry re-queues the same row.
    UNIQUE (instance_id, step_id, iteration)
) STRICT;
INSERT INTO workflow_tasks_new (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
    lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at, iteration)
SELECT id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
    lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at, iteration
FROM workflow_tasks;
DROP TABLE workflow_tasks;
ALTER TABLE workflow_tasks_new RENAME TO workflow_tasks;
-- Claiming: status = 'QUEUED' AND queue IN (…) AND run_at <= ? ORDER BY run_at.
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, run_at) WHERE status = 'QUEUED';
-- Lease expiry: status = 'LEASED' AND lease_until < ? ORDER BY lease_until.
CREATE INDEX workflow_tasks_expiry_idx ON workflow_tasks (lease_until) WHERE status = 'LEASED';

-- +goose Down
CREATE TABLE workflow_tasks_old (
    id               TEXT    NOT NULL PRIMARY KEY,
    instance_id      TEXT    NOT NULL REFERENCES workflow_instances (id),
    step_id          TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('QUEUED', 'LEASED', 'DONE', 'FAILED', 'CANCELLED')),
    attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    run_at           INTEGER NOT NULL,
    lease            TEXT    NOT NULL DEFAULT '',
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      INTEGER,
    attempt_deadline INTEGER,
    input            TEXT    NOT NULL CHECK (json_valid(input)),
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (instance_id, step_id)
) STRICT;
INSERT INTO workflow_tasks_old SELECT id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
    lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at
FROM workflow_tasks WHERE iteration = 0;
DROP TABLE workflow_tasks;
ALTER TABLE workflow_tasks_old RENAME TO workflow_tasks;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, run_at) WHERE status = 'QUEUED';
CREATE INDEX workflow_tasks_expiry_idx ON workflow_tasks (lease_until) WHERE status = 'LEASED';
