-- The actor of each version: who asked for it (an API token's name,
-- 'engine' for the engine's own writes, 'anonymous' for requests to a
-- server without tokens). Every statement that writes a history row names
-- it; versions written before this migration have 'unknown'.
--
-- The column is added with a constant default, which PostgreSQL records
-- once for the existing rows instead of rewriting the table, and the
-- default is then dropped: a statement that forgot the actor fails (NOT
-- NULL) instead of recording a wrong one.

-- +goose Up
ALTER TABLE workflow_history ADD COLUMN actor text NOT NULL DEFAULT 'unknown';
ALTER TABLE workflow_history ALTER COLUMN actor DROP DEFAULT;

-- +goose Down
ALTER TABLE workflow_history DROP COLUMN actor;
