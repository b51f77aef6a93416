-- The W3C traceparent of the trace an instance was started in (NULL for
-- none), the same logical shape as the PostgreSQL migration 00016: every
-- attempt of its steps, on any node and after restarts, joins that trace.
-- (Numbered 00014: 00011–00013 belong to the other second-wave features.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN traceparent TEXT;

-- +goose Down
ALTER TABLE workflow_instances DROP COLUMN traceparent;
