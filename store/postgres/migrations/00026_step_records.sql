-- Each step's record (state.steps.S) moves to a row of its own: a write
-- stores the records of the steps it changed and the instance's header
-- (the state with "steps" empty), not every record again, so its cost does
-- not grow with the steps before it. Reads assemble the state. The
-- instances in flight are split here: their records become rows and their
-- headers lose them.

-- +goose Up
CREATE TABLE workflow_steps (
    instance_id text  NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    step_id     text  NOT NULL,
    record      jsonb NOT NULL,
    PRIMARY KEY (instance_id, step_id)
);
INSERT INTO workflow_steps (instance_id, step_id, record)
SELECT i.id, s.key, s.value
FROM workflow_instances i, jsonb_each(i.state->'steps') s
WHERE jsonb_typeof(i.state->'steps') = 'object';
UPDATE workflow_instances SET state = jsonb_set(state, '{steps}', '{}')
WHERE jsonb_typeof(state->'steps') = 'object' AND state->'steps' <> '{}';

-- +goose Down
UPDATE workflow_instances i SET state = jsonb_set(i.state, '{steps}',
    coalesce((SELECT jsonb_object_agg(s.step_id, s.record) FROM workflow_steps s WHERE s.instance_id = i.id), '{}'));
DROP TABLE workflow_steps;
