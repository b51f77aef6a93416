-- The workflow store schema (SPEC sections 2 and 3), the same logical shape as
-- the PostgreSQL one. SQLite specifics:
--   * STRICT tables, so a value of the wrong type is an error instead of being
--     stored as whatever SQLite's type affinity makes of it;
--   * timestamps are INTEGER unix microseconds (store.Timestamp precision);
--   * JSON is TEXT, validated in Go and again by CHECK (json_valid(…)).
-- The indexes are exactly the ones the queries need (SPEC section 9, item 8):
-- the primary key already serves every lookup by id, so there is deliberately
-- no index on (id, version).

-- +goose Up
CREATE TABLE workflow_instances (
    id         TEXT    NOT NULL PRIMARY KEY,
    definition TEXT    NOT NULL DEFAULT '',
    status     TEXT    NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    state      TEXT    NOT NULL CHECK (json_valid(state) AND json_type(state) = 'object'),
    input      TEXT    NOT NULL CHECK (json_valid(input)),
    version    INTEGER NOT NULL DEFAULT 0 CHECK (version >= 0),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- List: newest first, keyset pagination on (created_at, id).
CREATE INDEX workflow_instances_created_at_id_idx ON workflow_instances (created_at DESC, id DESC);
-- Batch status sweeps (status = ? AND updated_at < ? ORDER BY updated_at) and the status filter.
CREATE INDEX workflow_instances_status_updated_at_idx ON workflow_instances (status, updated_at);
-- List filtered by definition.
CREATE INDEX workflow_instances_definition_created_at_id_idx ON workflow_instances (definition, created_at DESC, id DESC);

CREATE TABLE workflow_history (
    instance_id TEXT    NOT NULL REFERENCES workflow_instances (id),
    version     INTEGER NOT NULL CHECK (version >= 0),
    status      TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (json_valid(state)),
    at          INTEGER NOT NULL,
    cause       TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (instance_id, version)
) STRICT;

-- History is append-only: nothing is ever lost or rewritten (SPEC section 3).
-- SQLite has no statement-level triggers and no TRUNCATE; a row trigger on
-- each of UPDATE and DELETE covers every way to change a stored row.
-- +goose StatementBegin
CREATE TRIGGER workflow_history_no_update BEFORE UPDATE ON workflow_history
BEGIN
    SELECT RAISE(ABORT, 'workflow_history is append-only: UPDATE is not allowed');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER workflow_history_no_delete BEFORE DELETE ON workflow_history
BEGIN
    SELECT RAISE(ABORT, 'workflow_history is append-only: DELETE is not allowed');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE workflow_history;
DROP TABLE workflow_instances;
