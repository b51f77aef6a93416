-- Which tasks a claim may take is decided by the engine and stored on the
-- task row: held is 1 while the instance's status holds the task (only a
-- RUNNING instance's tasks are delivered, and a PAUSED instance's sleep
-- timers), written with the status by the write that changes it. The
-- claim filters NOT held and no longer reads the instance's status. The
-- active tasks of instances an earlier release left in flight get the flag
-- that status gives them, so that a paused workflow stays paused. (The
-- same as PostgreSQL's migration 00023.)

-- +goose Up
ALTER TABLE workflow_tasks ADD COLUMN held INTEGER NOT NULL DEFAULT 0;

UPDATE workflow_tasks
SET held = 1
WHERE status IN ('QUEUED', 'LEASED')
    AND instance_id IN (SELECT id FROM workflow_instances i
        WHERE i.status <> 'RUNNING' AND NOT (i.status = 'PAUSED' AND workflow_tasks.queue = 'flowd:sleep'));

-- +goose Down
ALTER TABLE workflow_tasks DROP COLUMN held;
