-- Workers seen polling (GET /v1/workers), the same logical shape as the
-- PostgreSQL migration 00004: one row per (worker, node), replaced at most
-- every few seconds, deleted by the sweeper once older than the listing
-- window. The last_poll_at index serves the listing and that delete.

-- +goose Up
CREATE TABLE workers (
    worker       TEXT    NOT NULL,
    node         TEXT    NOT NULL,
    handlers     TEXT    NOT NULL CHECK (json_valid(handlers) AND json_type(handlers) = 'array'),
    last_poll_at INTEGER NOT NULL,
    PRIMARY KEY (worker, node)
) STRICT;

CREATE INDEX workers_last_poll_at_idx ON workers (last_poll_at);

-- +goose Down
DROP TABLE workers;
