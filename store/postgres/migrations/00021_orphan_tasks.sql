-- Every write that stops an instance now cancels its active tasks in that
-- write (the cancel cascade and batches included), so nothing sweeps for
-- active tasks of instances that no longer run. The ones an earlier
-- release left for that sweep are cancelled here, as it would have: their
-- lease ended with them.

-- +goose Up
UPDATE workflow_tasks t
SET status = 'CANCELLED', lease = '', lease_owner = '', lease_until = NULL, attempt_deadline = NULL, updated_at = now()
FROM workflow_instances i
WHERE i.id = t.instance_id AND (t.status = 'QUEUED' OR t.status = 'LEASED')
    AND i.status NOT IN ('RUNNING', 'PAUSED');

-- +goose Down
-- Nothing to undo: the tasks stay cancelled.
