-- Schedules (PUT /v1/schedules/{name}): what a schedule starts and when, and
-- where its firing stands. fired_until is the guard of every fire: a node
-- fires the fire times after it and advances it in the same transaction as
-- the instance's create, only while it is still the value it read, so one
-- fire time starts one instance however many nodes fire at once.

-- +goose Up
CREATE TABLE schedules (
    name             text        PRIMARY KEY,
    definition       text        NOT NULL,
    cron             text        NOT NULL,
    timezone         text        NOT NULL,
    input            json        NOT NULL,
    overlap          text        NOT NULL CHECK (overlap IN ('skip', 'allow', 'buffer_one', 'cancel_other')),
    paused           boolean     NOT NULL,
    catchup_window   bigint      NOT NULL CHECK (catchup_window > 0),
    fired_until      timestamptz NOT NULL,
    last_fire_at     timestamptz,
    last_instance_id text        NOT NULL DEFAULT '',
    buffered_fire_at timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

-- +goose Down
DROP TABLE schedules;
