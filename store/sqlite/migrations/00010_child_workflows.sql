-- Child workflows, the same logical shape as the PostgreSQL migration
-- 00012: the step of another instance that started this one (parent_index
-- for a foreach step's item, NULL otherwise), and an index for the lookup
-- by parent in List's order.
-- (Numbered 00010: 00007–00009 belong to the other control-flow features.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN parent_id TEXT;
ALTER TABLE workflow_instances ADD COLUMN parent_step TEXT;
ALTER TABLE workflow_instances ADD COLUMN parent_index INTEGER;

CREATE INDEX workflow_instances_parent_idx ON workflow_instances (parent_id, created_at DESC, id DESC)
    WHERE parent_id IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instances_parent_idx;
ALTER TABLE workflow_instances DROP COLUMN parent_index;
ALTER TABLE workflow_instances DROP COLUMN parent_step;
ALTER TABLE workflow_instances DROP COLUMN parent_id;
