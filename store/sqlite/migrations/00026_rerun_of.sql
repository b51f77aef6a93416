-- Re-runs, the same logical shape as the PostgreSQL migration 00029: the
-- id of the instance a re-run was started from (no foreign key: the
-- original may be deleted), and an index for the lookup of an instance's
-- re-runs in List's order.
-- (Numbered 00026: 00025 and 00027 belong to the other features of
-- operating many workflows.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN rerun_of TEXT;

CREATE INDEX workflow_instances_rerun_of_idx ON workflow_instances (rerun_of, created_at DESC, id DESC)
    WHERE rerun_of IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instances_rerun_of_idx;
ALTER TABLE workflow_instances DROP COLUMN rerun_of;
