-- The retention sweep (DeleteFinished) looks for finished instances whose
-- updated_at is before a cutoff. This partial index holds finished
-- instances only, in updated_at order: the sweep reads the oldest first and
-- stops at its batch's limit, however many live instances the table holds,
-- and with a generic plan too (the cutoff is a parameter). A finished
-- instance's updated_at rarely changes, so the index costs little to keep.
-- SQLite needs no such index: its planner reads the (status, updated_at)
-- index once per finished status.
-- (Numbered 00008: 00007 is the history storage migration.)

-- +goose Up
CREATE INDEX workflow_instances_finished_updated_at_idx ON workflow_instances (updated_at)
    WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT');

-- +goose Down
DROP INDEX workflow_instances_finished_updated_at_idx;
