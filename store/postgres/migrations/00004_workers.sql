-- Workers seen polling (GET /v1/workers): one row per (worker, node), replaced
-- at most every few seconds by the node that served the poll, so that every
-- node of a cluster lists the workers of all of them. Rows older than the
-- listing window are deleted by the sweeper; the last_poll_at index serves
-- both the listing and that delete.

-- +goose Up
CREATE TABLE workers (
    worker       text        NOT NULL,
    node         text        NOT NULL,
    handlers     jsonb       NOT NULL CHECK (jsonb_typeof(handlers) = 'array'),
    last_poll_at timestamptz NOT NULL,
    PRIMARY KEY (worker, node)
);

CREATE INDEX workers_last_poll_at_idx ON workers (last_poll_at);

-- +goose Down
DROP TABLE workers;
