-- Idempotency keys of POST /v1/workflows: one row per key, written by the
-- same statement that creates the instance, so that neither can exist
-- without the other. request_hash identifies the request the key was first
-- used with (a repeat with another body is refused). A key counts for 24
-- hours: Create replaces an older row, and the sweeper deletes such rows in
-- batches through the created_at index. Deleting an instance deletes its key.

-- +goose Up
CREATE TABLE idempotency_keys (
    key          text        NOT NULL PRIMARY KEY,
    request_hash text        NOT NULL,
    workflow_id  text        NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL
);

CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);
-- The foreign key's cascade looks keys up by instance.
CREATE INDEX idempotency_keys_workflow_id_idx ON idempotency_keys (workflow_id);

-- +goose Down
DROP TABLE idempotency_keys;
