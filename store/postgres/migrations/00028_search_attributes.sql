-- Search attributes: named values (a string, a number or a boolean) stored
-- beside an instance, one row each, so that a list finds the instances of
-- one value without reading their states. value is the text a list
-- compares (a number or a boolean as JSON writes it), kind its JSON type.
-- created_at is the instance's, copied: the index gives an equality on one
-- attribute in the list's order (created_at, id descending) and pages it
-- by the cursor from the index alone. An instance without attributes has
-- no row; deleting an instance deletes its rows.

-- +goose Up
CREATE TABLE workflow_search (
    instance_id text        NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    name        text        NOT NULL,
    value       text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('string', 'number', 'boolean')),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (instance_id, name)
);
CREATE INDEX workflow_search_value_idx ON workflow_search (name, value, created_at DESC, instance_id DESC);

-- +goose Down
DROP TABLE workflow_search;
