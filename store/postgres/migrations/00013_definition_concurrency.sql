-- Definition concurrency limits: the QUEUED status, each instance's
-- concurrency key and limit (NULL for an instance without one), and the slot
-- guard. RUNNING and PAUSED hold a slot of the key. Every write that moves an
-- instance with a key from a status that holds none into one that does — an
-- INSERT, or an UPDATE of status, whatever statement makes it — runs the
-- guard in the same transaction: it takes an advisory transaction lock of
-- the key, then counts the key's holders with a fresh snapshot (a plpgsql
-- statement at READ COMMITTED sees everything committed before it started,
-- so everything the lock's previous holders wrote), and refuses (SQLSTATE
-- FD429, store.ErrConcurrencyLimit) when the limit is reached. The lock is
-- held until the transaction ends, so the next writer of the key counts this
-- one's row: never more holders than the limit, not even for a moment.
-- Writes that free a slot take no lock: a guard that counts a holder that is
-- leaving only refuses, it never admits one too many. A new instance is also
-- refused while older ones of the key wait QUEUED, so that they start first.

-- +goose Up
ALTER TABLE workflow_instances DROP CONSTRAINT workflow_instances_status_check;
ALTER TABLE workflow_instances ADD CONSTRAINT workflow_instances_status_check
    CHECK (status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'));
ALTER TABLE workflow_instances ADD COLUMN concurrency_key text;
ALTER TABLE workflow_instances ADD COLUMN concurrency_limit integer;
ALTER TABLE workflow_instances ADD CONSTRAINT workflow_instances_concurrency_check
    CHECK ((concurrency_key IS NULL) = (concurrency_limit IS NULL) AND (concurrency_limit IS NULL OR concurrency_limit >= 1));

-- The guard's count, the queue's order and the promotion's look-up.
CREATE INDEX workflow_instances_concurrency_idx ON workflow_instances (definition, concurrency_key, status, created_at, id)
    WHERE concurrency_key IS NOT NULL;

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

-- The WHEN clause keeps the function from even being called for the
-- writes of instances without a key, and for statuses that hold no slot.
CREATE TRIGGER workflow_instances_concurrency_guard
    BEFORE INSERT OR UPDATE OF status ON workflow_instances
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL AND NEW.status IN ('RUNNING', 'PAUSED'))
    EXECUTE FUNCTION flowd_concurrency_guard();

-- +goose Down
DROP TRIGGER workflow_instances_concurrency_guard ON workflow_instances;
DROP FUNCTION flowd_concurrency_guard();
DROP INDEX workflow_instances_concurrency_idx;
ALTER TABLE workflow_instances DROP CONSTRAINT workflow_instances_concurrency_check;
ALTER TABLE workflow_instances DROP COLUMN concurrency_limit;
ALTER TABLE workflow_instances DROP COLUMN concurrency_key;
ALTER TABLE workflow_instances DROP CONSTRAINT workflow_instances_status_check;
ALTER TABLE workflow_instances ADD CONSTRAINT workflow_instances_status_check
    CHECK (status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'));
