-- Each step's record (state.steps.S) moves to a row of its own: a write
-- stores the records of the steps it changed and the instance's header
-- (the state with "steps" empty), not every record again, so its cost does
-- not grow with the steps before it. Reads assemble the state. The
-- instances in flight are split here: their records become rows and their
-- headers lose them. (The same as PostgreSQL's migration 00026.)

-- +goose Up
CREATE TABLE workflow_steps (
    instance_id TEXT NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    step_id     TEXT NOT NULL,
    record      TEXT NOT NULL,
    PRIMARY KEY (instance_id, step_id)
) WITHOUT ROWID;
INSERT INTO workflow_steps (instance_id, step_id, record)
SELECT i.id, s.key, CASE s.type WHEN 'null' THEN 'null' ELSE s.value END
FROM workflow_instances i, json_each(i.state, '$.steps') s
WHERE json_type(i.state, '$.steps') = 'object';
UPDATE workflow_instances SET state = json_set(state, '$.steps', json('{}'))
WHERE json_type(state, '$.steps') = 'object' AND state->'$.steps' <> '{}';

-- +goose Down
UPDATE workflow_instances SET state = json_set(state, '$.steps',
    json((SELECT json_group_object(r.step_id, json(r.record)) FROM workflow_steps r WHERE r.instance_id = workflow_instances.id)));
DROP TABLE workflow_steps;
