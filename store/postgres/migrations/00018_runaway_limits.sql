-- Limits of runaway workflows.
--
-- workflow_descendants counts, per top-level workflow, the child workflows
-- and their descendants ever created under it. A top-level workflow is one
-- without a parent, or whose parent is no longer stored. The write that
-- creates a descendant increments the count in its own transaction, only
-- while it is below the limit (ON CONFLICT … WHERE descendants < max; the
-- row lock makes concurrent creators take turns), and otherwise calls
-- flowd_descendant_limit, whose error (SQLSTATE FD430,
-- store.ErrDescendantLimit) rolls the create back: never more descendants
-- than the limit, however many nodes create them at once. Deleting the
-- top-level workflow deletes its count.
--
-- workflow_instances_abandoned_idx holds the child workflows that still
-- run, so that the sweep's look-up of those whose parent stopped
-- (Due(abandoned): a cancel reaching every descendant) reads only them.
--
-- Databases with workflows in flight get the counts of their trees from
-- the parent links.
-- (Numbered 00018: 00017 belongs to another feature of the same release.)

-- +goose Up
CREATE TABLE workflow_descendants (
    root_id     text    PRIMARY KEY REFERENCES workflow_instances (id) ON DELETE CASCADE,
    descendants integer NOT NULL CHECK (descendants > 0)
);

-- +goose StatementBegin
CREATE FUNCTION flowd_descendant_limit(message text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'FD430', MESSAGE = message;
END
$$;
-- +goose StatementEnd

CREATE INDEX workflow_instances_abandoned_idx ON workflow_instances (parent_id)
    WHERE parent_id IS NOT NULL AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED');

-- Each child's top-level workflow: its farthest stored ancestor.
WITH RECURSIVE chain (id, ancestor, depth) AS (
    SELECT i.id, i.parent_id, 1 FROM workflow_instances i
    WHERE i.parent_id IS NOT NULL AND EXISTS (SELECT 1 FROM workflow_instances p WHERE p.id = i.parent_id)
  UNION ALL
    SELECT c.id, a.parent_id, c.depth + 1
    FROM chain c JOIN workflow_instances a ON a.id = c.ancestor
    WHERE a.parent_id IS NOT NULL AND c.depth < 100
      AND EXISTS (SELECT 1 FROM workflow_instances p WHERE p.id = a.parent_id)
), roots AS (
    SELECT DISTINCT ON (id) id, ancestor AS root_id FROM chain ORDER BY id, depth DESC
)
INSERT INTO workflow_descendants (root_id, descendants)
SELECT root_id, count(*) FROM roots GROUP BY root_id;

-- +goose Down
DROP INDEX workflow_instances_abandoned_idx;
DROP FUNCTION flowd_descendant_limit(text);
DROP TABLE workflow_descendants;
