-- Idempotency keys of POST /v1/workflows, the same logical shape as the
-- PostgreSQL migration 00005: one row per key, written in the transaction
-- that creates the instance; created_at in unix microseconds. A key counts
-- for 24 hours: Create replaces an older row, and the sweeper deletes such
-- rows in batches through the created_at index. Deleting an instance deletes
-- its key (foreign_keys is on for every connection).

-- +goose Up
CREATE TABLE idempotency_keys (
    key          TEXT    NOT NULL PRIMARY KEY,
    request_hash TEXT    NOT NULL,
    workflow_id  TEXT    NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);
-- The foreign key's cascade looks keys up by instance.
CREATE INDEX idempotency_keys_workflow_id_idx ON idempotency_keys (workflow_id);

-- +goose Down
DROP TABLE idempotency_keys;
