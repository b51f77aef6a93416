-- Bulk operations (POST /v1/bulk): an action applied to every instance a
-- filter matches, worked off in batches by the sweepers of every node.
-- version is the guard of every change: the record is replaced only while
-- it is the version its writer read. What the columns do not hold (action,
-- filter, counts, cursor, the batch in flight, the lease) is one JSON
-- document, encoded in Go.

-- +goose Up
CREATE TABLE bulk_operations (
    id         text        PRIMARY KEY,
    status     text        NOT NULL CHECK (status IN ('RUNNING', 'DONE', 'CANCELLED')),
    version    bigint      NOT NULL CHECK (version > 0),
    doc        jsonb       NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The dashboard's list of recent ones, and the sweepers' look for the
-- RUNNING ones (few).
CREATE INDEX bulk_operations_recent ON bulk_operations (created_at DESC, id COLLATE "C" DESC);
CREATE INDEX bulk_operations_running ON bulk_operations (created_at DESC, id COLLATE "C" DESC) WHERE status = 'RUNNING';

-- +goose Down
DROP TABLE bulk_operations;
