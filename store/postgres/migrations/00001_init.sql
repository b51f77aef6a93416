-- The workflow store schema (SPEC sections 2 and 3). The indexes are exactly
-- the ones the queries need (SPEC section 9, item 8): the primary key already
-- serves every lookup by id, so there is deliberately no index on (id, version).

-- +goose Up
CREATE TABLE workflow_instances (
    id         text        PRIMARY KEY,
    definition text        NOT NULL DEFAULT '',
    status     text        NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    state      jsonb       NOT NULL,
    input      jsonb       NOT NULL,
    version    bigint      NOT NULL DEFAULT 0 CHECK (version >= 0),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- List: newest first, keyset pagination on (created_at, id).
CREATE INDEX workflow_instances_created_at_id_idx ON workflow_instances (created_at DESC, id DESC);
-- Batch status sweeps (status = $1 AND updated_at < $2 ORDER BY updated_at) and the status filter.
CREATE INDEX workflow_instances_status_updated_at_idx ON workflow_instances (status, updated_at);
-- List filtered by definition.
CREATE INDEX workflow_instances_definition_created_at_id_idx ON workflow_instances (definition, created_at DESC, id DESC);

CREATE TABLE workflow_history (
    instance_id text        NOT NULL REFERENCES workflow_instances (id),
    version     bigint      NOT NULL CHECK (version >= 0),
    status      text        NOT NULL,
    state       jsonb       NOT NULL,
    at          timestamptz NOT NULL,
    cause       text        NOT NULL DEFAULT '',
    PRIMARY KEY (instance_id, version)
);

-- History is append-only: nothing is ever lost or rewritten (SPEC section 3).
-- A statement-level trigger also rejects an UPDATE or DELETE that matches no
-- row, and TRUNCATE, so the rule does not depend on the data.
-- +goose StatementBegin
CREATE FUNCTION workflow_history_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'workflow_history is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER workflow_history_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON workflow_history
    FOR EACH STATEMENT EXECUTE FUNCTION workflow_history_append_only();

-- +goose Down
DROP TABLE workflow_history;
DROP FUNCTION workflow_history_append_only();
DROP TABLE workflow_instances;
