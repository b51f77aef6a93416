-- The engine's tables (SPEC section 5): definition revisions, one task row
-- per (instance, step), and the instance columns the engine needs. As in
-- 00001, the indexes are exactly the ones the queries need.

-- +goose Up
ALTER TABLE workflow_instances
    ADD COLUMN definition_revision integer NOT NULL DEFAULT 0,
    ADD COLUMN deadline timestamptz;

-- The timeout sweep (TimeOutInstances): only live instances with a deadline.
CREATE INDEX workflow_instances_deadline_idx ON workflow_instances (deadline)
    WHERE status IN ('RUNNING', 'PAUSED') AND deadline IS NOT NULL;

-- spec is json, not jsonb: it keeps the canonical bytes the engine stored, so
-- both backends return the same text; equality with a new revision is tested
-- on the jsonb cast (semantic).
CREATE TABLE workflow_definitions (
    name       text        NOT NULL,
    revision   integer     NOT NULL CHECK (revision >= 1),
    spec       json        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (name, revision)
);

CREATE TABLE workflow_tasks (
    id               text        PRIMARY KEY,
    instance_id      text        NOT NULL REFERENCES workflow_instances (id),
    step_id          text        NOT NULL,
    queue            text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('QUEUED', 'LEASED', 'DONE', 'FAILED', 'CANCELLED')),
    attempt          integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    run_at           timestamptz NOT NULL,
    lease            text        NOT NULL DEFAULT '',
    lease_owner      text        NOT NULL DEFAULT '',
    lease_until      timestamptz,
    attempt_deadline timestamptz,
    input            jsonb       NOT NULL,
    last_error       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    -- At most one task per step: a retry re-queues the same row. The index
    -- also serves every lookup of an instance's tasks.
    UNIQUE (instance_id, step_id)
);

-- The claim query (LockClaimable), the engine's hot path: only queued rows,
-- so the index stays small however many finished tasks the table holds.
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, run_at) WHERE status = 'QUEUED';
-- The lease-expiry sweep (LockExpired).
CREATE INDEX workflow_tasks_expiry_idx ON workflow_tasks (lease_until) WHERE status = 'LEASED';

-- +goose Down
DROP TABLE workflow_tasks;
DROP TABLE workflow_definitions;
DROP INDEX workflow_instances_deadline_idx;
ALTER TABLE workflow_instances DROP COLUMN deadline, DROP COLUMN definition_revision;
