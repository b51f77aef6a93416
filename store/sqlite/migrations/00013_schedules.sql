-- Schedules (PUT /v1/schedules/{name}), the same logical shape as the
-- PostgreSQL migration 00015. fired_until is the guard of every fire: a node
-- fires the fire times after it and advances it in the same transaction as
-- the instance's create, only while it is still the value it read. Times are
-- microseconds since the epoch; catchup_window is nanoseconds.

-- +goose Up
CREATE TABLE schedules (
    name             TEXT    PRIMARY KEY,
    definition       TEXT    NOT NULL,
    cron             TEXT    NOT NULL,
    timezone         TEXT    NOT NULL,
    input            TEXT    NOT NULL CHECK (json_valid(input)),
    overlap          TEXT    NOT NULL CHECK (overlap IN ('skip', 'allow', 'buffer_one', 'cancel_other')),
    paused           INTEGER NOT NULL CHECK (paused IN (0, 1)),
    catchup_window   INTEGER NOT NULL CHECK (catchup_window > 0),
    fired_until      INTEGER NOT NULL,
    last_fire_at     INTEGER,
    last_instance_id TEXT    NOT NULL DEFAULT '',
    buffered_fire_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE schedules;
