-- Deleting workflows and definitions, the same logical shape as the
-- PostgreSQL migration 00006: history stays append-only while its instance
-- is live (UPDATE is refused for every row), but the rows of an instance
-- that nothing runs for any more (COMPLETED, FAILED, CANCELLED, TIMED_OUT)
-- can be deleted, as DeleteInstance does together with the instance in one
-- transaction. workflow_definition_tombstones keeps the highest revision of
-- each deleted definition name, so a later PUT of that name continues from
-- there and a (name, revision) pair is never used twice.

-- +goose Up
DROP TRIGGER workflow_history_no_delete;

-- +goose StatementBegin
CREATE TRIGGER workflow_history_no_delete BEFORE DELETE ON workflow_history
WHEN EXISTS (SELECT 1 FROM workflow_instances WHERE id = OLD.instance_id
             AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'))
BEGIN
    SELECT RAISE(ABORT, 'workflow_history is append-only while its workflow is live');
END;
-- +goose StatementEnd

CREATE TABLE workflow_definition_tombstones (
    name     TEXT    NOT NULL PRIMARY KEY,
    revision INTEGER NOT NULL CHECK (revision >= 1)
) STRICT;

-- +goose Down
DROP TABLE workflow_definition_tombstones;
DROP TRIGGER workflow_history_no_delete;
-- +goose StatementBegin
CREATE TRIGGER workflow_history_no_delete BEFORE DELETE ON workflow_history
BEGIN
    SELECT RAISE(ABORT, 'workflow_history is append-only: DELETE is not allowed');
END;
-- +goose StatementEnd
