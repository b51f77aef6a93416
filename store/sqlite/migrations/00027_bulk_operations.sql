-- Bulk operations (POST /v1/bulk), the same logical shape as the
-- PostgreSQL migration 00030. version is the guard of every change: the
-- record is replaced only while it is the version its writer read. What
-- the columns do not hold (action, filter, counts, cursor, the batch in
-- flight, the lease) is one JSON document, encoded in Go. Times are
-- microseconds since the epoch.

-- +goose Up
CREATE TABLE bulk_operations (
    id         TEXT    PRIMARY KEY,
    status     TEXT    NOT NULL CHECK (status IN ('RUNNING', 'DONE', 'CANCELLED')),
    version    INTEGER NOT NULL CHECK (version > 0),
    doc        TEXT    NOT NULL CHECK (json_valid(doc)),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- The dashboard's list of recent ones, and the sweepers' look for the
-- RUNNING ones (few).
CREATE INDEX bulk_operations_recent ON bulk_operations (created_at DESC, id DESC);
CREATE INDEX bulk_operations_running ON bulk_operations (created_at DESC, id DESC) WHERE status = 'RUNNING';

-- +goose Down
DROP TABLE bulk_operations;
