-- Deleting workflows and definitions (DeleteInstance, DeleteDefinition).
--
-- History stays append-only while its instance is live: UPDATE and
-- TRUNCATE are still refused for every row, but the rows of an instance
-- that nothing runs for any more (COMPLETED, FAILED, CANCELLED, TIMED_OUT)
-- can be deleted, as DeleteInstance does together with the instance in one
-- transaction. The DELETE rule depends on each row's instance, so it moves
-- from the statement-level trigger to a row-level one.
--
-- workflow_definition_tombstones keeps, per deleted definition name, the
-- highest revision it had: a later PUT of that name continues from there,
-- so a (name, revision) pair is never used twice. Every node's engine
-- caches compiled revisions by that pair, and a finished instance keeps
-- naming the revision it ran.

-- +goose Up
DROP TRIGGER workflow_history_append_only ON workflow_history;
CREATE TRIGGER workflow_history_append_only
    BEFORE UPDATE OR TRUNCATE ON workflow_history
    FOR EACH STATEMENT EXECUTE FUNCTION workflow_history_append_only();

-- +goose StatementBegin
CREATE FUNCTION workflow_history_delete_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM workflow_instances WHERE id = OLD.instance_id
               AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')) THEN
        RAISE EXCEPTION 'workflow_history is append-only while workflow % is live', OLD.instance_id
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN OLD;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER workflow_history_delete_finished
    BEFORE DELETE ON workflow_history
    FOR EACH ROW EXECUTE FUNCTION workflow_history_delete_finished();

CREATE TABLE workflow_definition_tombstones (
    name     text    PRIMARY KEY,
    revision integer NOT NULL CHECK (revision >= 1)
);

-- +goose Down
DROP TABLE workflow_definition_tombstones;
DROP TRIGGER workflow_history_delete_finished ON workflow_history;
DROP FUNCTION workflow_history_delete_finished();
DROP TRIGGER workflow_history_append_only ON workflow_history;
CREATE TRIGGER workflow_history_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON workflow_history
    FOR EACH STATEMENT EXECUTE FUNCTION workflow_history_append_only();
