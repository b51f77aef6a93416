-- A completed iteration of a foreach step keeps its output on its own task
-- row: the step's record kept every output so far in its bookkeeping
-- (foreach.outputs), and each iteration's completion wrote them all again.
-- The outputs of the iterations in flight move to their rows here. (The
-- same as PostgreSQL's migration 00027.)

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN output TEXT;
UPDATE workflow_tasks SET output = (
    SELECT s.record -> ('$.foreach.outputs."' || (workflow_tasks.iteration - 1) || '"')
    FROM workflow_steps s
    WHERE s.instance_id = workflow_tasks.instance_id AND s.step_id = workflow_tasks.step_id)
WHERE iteration > 0;
UPDATE workflow_steps SET record = json_remove(record, '$.foreach.outputs')
WHERE json_type(record, '$.foreach.outputs') IS NOT NULL;

-- +goose Down
UPDATE workflow_steps SET record = json_set(record, '$.foreach.outputs', json((
    SELECT coalesce(json_group_object(CAST(t.iteration - 1 AS TEXT), json(t.output)), '{}') FROM workflow_tasks t
    WHERE t.instance_id = workflow_steps.instance_id AND t.step_id = workflow_steps.step_id AND t.iteration > 0 AND t.output IS NOT NULL)))
WHERE json_type(record, '$.foreach') = 'object';
ALTER TABLE workflow_tasks DROP COLUMN output;
