-- Every write that stops an instance now cancels its active tasks in that
-- write (the cancel cascade and batches included), so nothing sweeps for
-- active tasks of instances that no longer run. The ones an earlier
-- release left for that sweep are cancelled here, as it would have: their
-- lease ended with them. (The same as PostgreSQL's migration 00021.)

-- +goose Up
UPDATE workflow_tasks
SET status = 'CANCELLED', lease = '', lease_owner = '', lease_until = NULL, attempt_deadline = NULL,
    updated_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000000
WHERE status IN ('QUEUED', 'LEASED')
    AND instance_id IN (SELECT id FROM workflow_instances WHERE status NOT IN ('RUNNING', 'PAUSED'));

-- +goose Down
-- Nothing to undo: the tasks stay cancelled.
