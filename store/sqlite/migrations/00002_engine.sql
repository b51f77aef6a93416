-- The engine's tables (SPEC section 5): definitions with revisions, one task
-- row per (instance, step), and the instance columns the engine needs (the
-- definition revision an instance started with, its workflow deadline). The
-- same logical shape as the PostgreSQL migration 00002; SQLite specifics as in
-- 00001 (STRICT tables, INTEGER unix microseconds, JSON as checked TEXT).
--
-- Every index here serves one engine query, and there are no others: the
-- UNIQUE (instance_id, step_id) index serves the lookups of an instance's
-- tasks. The partial indexes hold only the rows their query can return, so the
-- hot paths (claiming, lease expiry, the timeout sweep) never scan finished
-- tasks or instances. SQLite uses a partial index only when the query's WHERE
-- clause contains the index's WHERE terms literally: the queries in tasks.go
-- spell them exactly as they are written here.

-- +goose Up
-- ADD COLUMN keeps every existing row: definition_revision becomes 0 (a
-- free-form instance), deadline NULL (no timeout).
ALTER TABLE workflow_instances ADD COLUMN definition_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_instances ADD COLUMN deadline INTEGER;

-- The timeout sweep: status IN ('RUNNING', 'PAUSED') AND deadline < ? ORDER BY deadline.
CREATE INDEX workflow_instances_deadline_idx ON workflow_instances (deadline)
    WHERE status IN ('RUNNING', 'PAUSED') AND deadline IS NOT NULL;

CREATE TABLE workflow_definitions (
    name       TEXT    NOT NULL,
    revision   INTEGER NOT NULL CHECK (revision >= 1),
    spec       TEXT    NOT NULL CHECK (json_valid(spec)),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, revision)
) STRICT;

CREATE TABLE workflow_tasks (
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
    -- At most one task per step: a retry re-queues the same row.
    UNIQUE (instance_id, step_id)
) STRICT;

-- Claiming: status = 'QUEUED' AND queue IN (…) AND run_at <= ? ORDER BY run_at.
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, run_at) WHERE status = 'QUEUED';
-- Lease expiry: status = 'LEASED' AND lease_until < ? ORDER BY lease_until.
CREATE INDEX workflow_tasks_expiry_idx ON workflow_tasks (lease_until) WHERE status = 'LEASED';

-- +goose Down
DROP TABLE workflow_tasks;
DROP TABLE workflow_definitions;
DROP INDEX workflow_instances_deadline_idx;
ALTER TABLE workflow_instances DROP COLUMN deadline;
ALTER TABLE workflow_instances DROP COLUMN definition_revision;
