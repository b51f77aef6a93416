-- Limits of runaway workflows, the same logical shape as the PostgreSQL
-- migration 00018: workflow_descendants counts, per top-level workflow
-- (one without a parent, or whose parent is no longer stored), the child
-- workflows and their descendants ever created under it, incremented by
-- the write that creates one while below the limit (SQLite's single writer
-- makes it exact); workflow_instances_abandoned_idx holds the child
-- workflows that still run, for the sweep's look-up of those whose parent
-- stopped. Databases with workflows in flight get the counts of their
-- trees from the parent links.
-- (Numbered 00016: 00015 belongs to another feature of the same release.)

-- +goose Up
CREATE TABLE workflow_descendants (
    root_id     TEXT    PRIMARY KEY REFERENCES workflow_instances (id) ON DELETE CASCADE,
    descendants INTEGER NOT NULL CHECK (descendants > 0)
) WITHOUT ROWID;

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
    SELECT c.id, c.ancestor AS root_id FROM chain c
    WHERE c.depth = (SELECT max(d.depth) FROM chain d WHERE d.id = c.id)
)
INSERT INTO workflow_descendants (root_id, descendants)
SELECT root_id, count(*) FROM roots GROUP BY root_id;

-- +goose Down
DROP INDEX workflow_instances_abandoned_idx;
DROP TABLE workflow_descendants;
