-- A completed iteration of a foreach step keeps its output on its own task
-- row: the step's record kept every output so far in its bookkeeping
-- (foreach.outputs), and each iteration's completion wrote them all again.
-- The outputs of the iterations in flight move to their rows here.

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN output jsonb;
UPDATE workflow_tasks t SET output = s.record->'foreach'->'outputs'->((t.iteration - 1)::text)
FROM workflow_steps s
WHERE s.instance_id = t.instance_id AND s.step_id = t.step_id AND t.iteration > 0
    AND jsonb_typeof(s.record->'foreach'->'outputs') = 'object'
    AND s.record->'foreach'->'outputs' ? ((t.iteration - 1)::text);
UPDATE workflow_steps SET record = record #- '{foreach,outputs}'
WHERE jsonb_typeof(record->'foreach') = 'object' AND record->'foreach' ? 'outputs';

-- +goose Down
UPDATE workflow_steps s SET record = jsonb_set(s.record, '{foreach,outputs}',
    coalesce((SELECT jsonb_object_agg((t.iteration - 1)::text, t.output) FROM workflow_tasks t
        WHERE t.instance_id = s.instance_id AND t.step_id = s.step_id AND t.iteration > 0 AND t.output IS NOT NULL), '{}'))
WHERE jsonb_typeof(s.record->'foreach') = 'object';
ALTER TABLE workflow_tasks DROP COLUMN output;
