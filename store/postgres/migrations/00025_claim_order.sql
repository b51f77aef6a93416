-- A claim takes tasks in delivery order — highest priority first, then
-- the oldest run_at, then the id (bytewise) — and the claim index now
-- holds that whole order: with the id in it, a claim reads the rows it
-- takes and stops, instead of sorting every task due at the same moment
-- (a backlog started together shares its run_at), whatever the queue's
-- depth.

-- +goose Up
DROP INDEX workflow_tasks_claim_idx;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, priority, run_at, id COLLATE "C") WHERE status = 'QUEUED';

-- +goose Down
DROP INDEX workflow_tasks_claim_idx;
CREATE INDEX workflow_tasks_claim_idx ON workflow_tasks (queue, priority, run_at) WHERE status = 'QUEUED';
