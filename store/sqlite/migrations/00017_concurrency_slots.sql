-- Definition concurrency slots as rows, the same logical shape as the
-- PostgreSQL migration 00020: concurrency_slots holds, per concurrency key
-- of a definition, how many of its instances hold a slot (RUNNING or
-- PAUSED) and how many wait QUEUED. The rule of what a write does to them
-- is Go's (store.SlotChangeOf); every write that changes them applies its
-- change to the key's row in the same transaction, guarded (holders below
-- the instance's limit, and for a new instance no QUEUED one). The counts
-- start from the instances in flight; the guard triggers go.

-- +goose Up
CREATE TABLE concurrency_slots (
    definition TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    holders    INTEGER NOT NULL DEFAULT 0,
    queued     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (definition, key)
) WITHOUT ROWID;

INSERT INTO concurrency_slots (definition, key, holders, queued)
SELECT definition, concurrency_key,
    sum(status IN ('RUNNING', 'PAUSED')),
    sum(status = 'QUEUED')
FROM workflow_instances
WHERE concurrency_key IS NOT NULL AND status IN ('QUEUED', 'RUNNING', 'PAUSED')
GROUP BY definition, concurrency_key;

DROP TRIGGER workflow_instances_concurrency_insert;
DROP TRIGGER workflow_instances_concurrency_update;

-- +goose Down
-- The triggers as migration 00011 made them.
-- +goose StatementBegin
CREATE TRIGGER workflow_instances_concurrency_insert BEFORE INSERT ON workflow_instances
WHEN NEW.concurrency_key IS NOT NULL AND NEW.status IN ('RUNNING', 'PAUSED')
BEGIN
    SELECT RAISE(ABORT, 'flowd concurrency limit: the key''s slots are all held, or older instances of it wait QUEUED')
    WHERE (SELECT count(*) FROM workflow_instances
           WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key
             AND status IN ('RUNNING', 'PAUSED') AND id <> NEW.id) >= NEW.concurrency_limit
       OR EXISTS (SELECT 1 FROM workflow_instances
           WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key AND status = 'QUEUED');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER workflow_instances_concurrency_update BEFORE UPDATE OF status ON workflow_instances
WHEN NEW.concurrency_key IS NOT NULL AND NEW.status IN ('RUNNING', 'PAUSED') AND OLD.status NOT IN ('RUNNING', 'PAUSED')
BEGIN
    SELECT RAISE(ABORT, 'flowd concurrency limit: the key''s slots are all held')
    WHERE (SELECT count(*) FROM workflow_instances
           WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key
             AND status IN ('RUNNING', 'PAUSED') AND id <> NEW.id) >= NEW.concurrency_limit;
END;
-- +goose StatementEnd

DROP TABLE concurrency_slots;
