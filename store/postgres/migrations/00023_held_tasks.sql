-- Which tasks a claim may take is decided by the engine and stored on the
-- task row: held is true while the instance's status holds the task (only
-- a RUNNING instance's tasks are delivered, and a PAUSED instance's sleep
-- timers), written with the status by the write that changes it. The
-- claim filters NOT held and no longer reads the instance's status. The
-- active tasks of instances an earlier release left in flight get the flag
-- that status gives them, so that a paused workflow stays paused.

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN held boolean NOT NULL DEFAULT false;

UPDATE workflow_tasks t
SET held = true
FROM workflow_instances i
WHERE i.id = t.instance_id AND (t.status = 'QUEUED' OR t.status = 'LEASED')
    AND i.status <> 'RUNNING' AND NOT (i.status = 'PAUSED' AND t.queue = 'flowd:sleep');

-- +goose Down
ALTER TABLE workflow_tasks DROP COLUMN held;
