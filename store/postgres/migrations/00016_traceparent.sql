-- The W3C traceparent of the trace an instance was started in (NULL for
-- none): every attempt of its steps, on any node and after restarts, joins
-- that trace. Read with the instance; no index, nothing looks it up.
-- (Numbered 00016: 00013–00015 belong to the other second-wave features.)

-- +goose Up
ALTER TABLE workflow_instances ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE workflow_instances DROP COLUMN traceparent;
