package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// descendantsSQL lists the descendants of the instances of the JSON array
// ?1 by the parent links, each with the instance of ?1 it descends from,
// its parent and its status. UNION (not UNION ALL) ends the recursion
// should links ever form a cycle.
const descendantsSQL = `WITH RECURSIVE tree (id, root) AS (
	SELECT c.id, c.parent_id FROM workflow_instances c WHERE c.parent_id IN (SELECT value FROM json_each(?1))
  UNION
	SELECT c.id, t.root FROM workflow_instances c JOIN tree t ON c.parent_id = t.id
)
SELECT t.id, t.root, i.parent_id, i.status FROM tree t JOIN workflow_instances i ON i.id = t.id`

// descendants reads the descendants of roots in the write transaction c:
// SQLite's single writer holds them all, so each comes back Locked.
func descendants(ctx context.Context, c dbtx, roots []string) ([]store.TreeMember, error) {
	list, err := json.Marshal(roots)
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryContext(ctx, descendantsSQL, string(list))
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	var members []store.TreeMember
	for rows.Next() {
		var (
			m      store.TreeMember
			parent sql.NullString
			status string
		)
		if err := rows.Scan(&m.ID, &m.Root, &parent, &status); err != nil {
			return nil, interpretError(ctx, err)
		}
		if m.ID == m.Root {
			continue
		}
		m.Parent, m.Status, m.Locked = parent.String, workflow.Status(status), true
		members = append(members, m)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return members, nil
}

// deleteTrees deletes the instances ids (finished, checked in the write
// transaction c) with their history and tasks, the instances' rows last:
// the foreign keys to an instance are checked at each statement's end,
// and have no cascade except those of idempotency keys, step records and
// descendant counts. It returns how many instance rows it deleted; the
// instances' DELETE repeats the status check. The ids travel as one JSON
// array parameter, never as SQL text.
func deleteTrees(ctx context.Context, c dbtx, ids []string) (int64, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	for _, stmt := range []string{
		`DELETE FROM workflow_history WHERE instance_id IN (SELECT value FROM json_each(?1))`,
		`DELETE FROM workflow_tasks WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	} {
		if _, err := c.ExecContext(ctx, stmt, string(list)); err != nil {
			return 0, interpretError(ctx, err)
		}
	}
	res, err := c.ExecContext(ctx, `DELETE FROM workflow_instances WHERE id IN (SELECT value FROM json_each(?1))
		AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`, string(list))
	if err != nil {
		return 0, interpretError(ctx, err)
	}
	n, err := res.RowsAffected()
	return n, interpretError(ctx, err)
}
