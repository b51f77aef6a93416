-- The output of a workflow instance: what its definition's output template
-- (or, without one, its final steps' outputs) rendered to when it
-- completed, written in the same statement as the COMPLETED status. NULL
-- until then, and for instances that complete otherwise (a free-form
-- instance, a status forced through the API). json, not jsonb: it keeps the
-- bytes the engine rendered (keys in its order), so both backends return
-- the same text.

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN output json;

-- +goose Down
ALTER TABLE workflow_instances DROP COLUMN output;
