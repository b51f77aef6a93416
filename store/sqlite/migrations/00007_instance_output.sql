-- The output of a workflow instance, as PostgreSQL's migration 00009: what
-- it rendered to when it completed, written in the same transaction as the
-- COMPLETED status; NULL until then.

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN output TEXT CHECK (output IS NULL OR json_valid(output));

-- +goose Down
ALTER TABLE workflow_instances DROP COLUMN output;
