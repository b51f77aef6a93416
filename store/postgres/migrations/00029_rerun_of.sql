-- Re-runs: an instance started as a re-run of another one from a step
-- records that one's id, so that GET /v1/workflows/{id} lists an
-- instance's re-runs and GET /v1/workflows?rerun_of=ID finds them. No
-- foreign key: the original may be deleted and its re-runs stay, still
-- naming it. The partial index holds re-runs only and serves the lookup in
-- List's order.
-- (Numbered 00029: 00028 and 00030 belong to the other features of
-- operating many workflows.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN rerun_of text;

CREATE INDEX workflow_instances_rerun_of_idx ON workflow_instances (rerun_of, created_at DESC, id DESC)
    WHERE rerun_of IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instances_rerun_of_idx;
ALTER TABLE workflow_instances DROP COLUMN rerun_of;
