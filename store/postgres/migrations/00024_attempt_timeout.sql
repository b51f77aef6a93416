-- A claim leases task rows alone, without reading the definition or
-- writing the instance:
-- - A task row carries the bound of each of its attempts (its step's
--   timeout, in microseconds; 0: none), decided when the task is
--   inserted. Tasks that an earlier release queued have no bound stored:
--   their next attempt runs without the step's timeout (the lease still
--   ends it if its worker dies).
-- - A read of an instance shows the attempt its leased tasks run (the
--   state counts an attempt from the version that ends it), found through
--   a partial index of the leased tasks of steps without foreach.

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN attempt_timeout_us bigint NOT NULL DEFAULT 0;
CREATE INDEX workflow_tasks_in_flight_idx ON workflow_tasks (instance_id) WHERE status = 'LEASED' AND iteration = 0;

-- +goose Down
DROP INDEX workflow_tasks_in_flight_idx;
ALTER TABLE workflow_tasks DROP COLUMN attempt_timeout_us;
