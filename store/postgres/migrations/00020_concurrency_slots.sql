-- Definition concurrency slots as rows: concurrency_slots holds, per
-- concurrency key of a definition, how many of its instances hold a slot
-- (RUNNING or PAUSED) and how many wait QUEUED. The rule of what a write
-- does to them is Go's (store.SlotChangeOf); every write that changes them
-- applies its change to the key's row in the same statement, guarded
-- (holders below the instance's limit, and for a new instance no QUEUED
-- one), and the row's lock makes the writers of a key take turns on every
-- node. The counts start from the instances in flight; the guard trigger,
-- its function and its advisory lock go.

-- +goose Up
CREATE TABLE concurrency_slots (
    definition text   NOT NULL,
    key        text   NOT NULL,
    holders    bigint NOT NULL DEFAULT 0,
    queued     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (definition, key)
);

INSERT INTO concurrency_slots (definition, key, holders, queued)
SELECT definition, concurrency_key,
    count(*) FILTER (WHERE status IN ('RUNNING', 'PAUSED')),
    count(*) FILTER (WHERE status = 'QUEUED')
FROM workflow_instances
WHERE concurrency_key IS NOT NULL AND status IN ('QUEUED', 'RUNNING', 'PAUSED')
GROUP BY definition, concurrency_key;

DROP TRIGGER workflow_instances_concurrency_guard ON workflow_instances;
DROP FUNCTION flowd_concurrency_guard();

-- +goose Down
-- The trigger and its function as migration 00013 made them.

-- +goose StatementBegin
CREATE FUNCTION flowd_concurrency_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    holders bigint;
BEGIN
    IF NEW.concurrency_key IS NULL OR NEW.status NOT IN ('RUNNING', 'PAUSED') THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status IN ('RUNNING', 'PAUSED') THEN
        RETURN NEW;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING ERRCODE = 'FD400',
            MESSAGE = format('workflow %s has a concurrency key: it can start or restart only in a READ COMMITTED transaction', NEW.id);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.definition || '/' || NEW.concurrency_key, 0));
    SELECT count(*) INTO holders FROM workflow_instances
        WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key
          AND status IN ('RUNNING', 'PAUSED') AND id <> NEW.id;
    IF holders >= NEW.concurrency_limit THEN
        RAISE EXCEPTION USING ERRCODE = 'FD429',
            MESSAGE = format('%s of %s slots of concurrency key %L of definition %s are held', holders, NEW.concurrency_limit, NEW.concurrency_key, NEW.definition);
    END IF;
    IF TG_OP = 'INSERT' AND EXISTS (SELECT 1 FROM workflow_instances
            WHERE definition = NEW.definition AND concurrency_key = NEW.concurrency_key AND status = 'QUEUED') THEN
        RAISE EXCEPTION USING ERRCODE = 'FD429',
            MESSAGE = format('instances of concurrency key %L of definition %s wait QUEUED', NEW.concurrency_key, NEW.definition);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER workflow_instances_concurrency_guard
    BEFORE INSERT OR UPDATE OF status ON workflow_instances
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL AND NEW.status IN ('RUNNING', 'PAUSED'))
    EXECUTE FUNCTION flowd_concurrency_guard();

DROP TABLE concurrency_slots;
