-- The actor of each version, the same logical shape as the PostgreSQL
-- migration 00017: who asked for it (an API token's name, 'engine' for the
-- engine's own writes, 'anonymous' for requests to a server without
-- tokens). Every statement that writes a history row names it; versions
-- written before this migration have 'unknown' (SQLite cannot drop the
-- default of a column without rebuilding its table, so it stays).

-- +goose Up
ALTER TABLE workflow_history ADD COLUMN actor TEXT NOT NULL DEFAULT 'unknown';

-- +goose Down
ALTER TABLE workflow_history DROP COLUMN actor;
