-- A foreach step runs one task per item: the task rows of one step are told
-- apart by their iteration (0 for a step without foreach, the item's index
-- plus one for an iteration), and a step has at most one row per iteration,
-- so a retry still re-queues the same row and no iteration is scheduled
-- twice.

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN iteration integer NOT NULL DEFAULT 0 CHECK (iteration >= 0);
ALTER TABLE workflow_tasks DROP CONSTRAINT workflow_tasks_instance_id_step_id_key;
ALTER TABLE workflow_tasks ADD CONSTRAINT workflow_tasks_instance_id_step_id_iteration_key UNIQUE (instance_id, step_id, iteration);

-- +goose Down
ALTER TABLE workflow_tasks DROP CONSTRAINT workflow_tasks_instance_id_step_id_iteration_key;
DELETE FROM workflow_tasks WHERE iteration > 0;
ALTER TABLE workflow_tasks ADD CONSTRAINT workflow_tasks_instance_id_step_id_key UNIQUE (instance_id, step_id);
ALTER TABLE workflow_tasks DROP COLUMN iteration;
