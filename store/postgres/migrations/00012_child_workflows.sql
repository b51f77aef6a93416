-- Child workflows: an instance started by a workflow step of another one
-- records that step, so that its outcome reaches the step and
-- GET /v1/workflows?parent=ID finds a parent's children. parent_index is
-- the item's index for a foreach step (NULL otherwise). No foreign key: a
-- finished parent may be deleted while its children's rows stay. The
-- partial index holds children only and serves the lookup by parent in
-- List's order.
-- (Numbered 00012: 00009–00011 belong to the other control-flow features.)

-- +goose Up
ALTER TABLE workflow_instances
    ADD COLUMN parent_id    text,
    ADD COLUMN parent_step  text,
    ADD COLUMN parent_index integer;

CREATE INDEX workflow_instances_parent_idx ON workflow_instances (parent_id, created_at DESC, id DESC)
    WHERE parent_id IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instances_parent_idx;
ALTER TABLE workflow_instances
    DROP COLUMN parent_index,
    DROP COLUMN parent_step,
    DROP COLUMN parent_id;
