-- A task row carries the bound of each of its attempts (its step's
-- timeout, in microseconds; 0: none), decided when the task is inserted,
-- so that a claim leases it without reading the definition. Tasks that an
-- earlier release queued have no bound stored: their next attempt runs
-- without the step's timeout (the lease still ends it if its worker dies).

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN attempt_timeout_us bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE workflow_tasks DROP COLUMN attempt_timeout_us;
