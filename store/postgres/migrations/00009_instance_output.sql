-- The output of a workflow instance: what its definition's output template
-- (or, without one, its final steps' outputs) rendered to when it
-- completed, written in the same statement as the COMPLETED status. NULL
-- until then, and for instances that complete otherwise (a free-form
-- instance, a status forced through the API).

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN output jsonb;

-- +goose Down
ALTER TABLE workflow_instances DROP COLUMN output;
