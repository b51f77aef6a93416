package postgres

import (
	"context"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const (
	// descendantsSQL lists the descendants of the instances $1 by the
	// parent links, each with the instance of $1 it descends from. UNION
	// (not UNION ALL) ends the recursion should links ever form a cycle.
	descendantsSQL = `WITH RECURSIVE tree (id, root) AS (
	SELECT c.id, c.parent_id FROM workflow_instances c WHERE c.parent_id = ANY ($1)
  UNION
	SELECT c.id, t.root FROM workflow_instances c JOIN tree t ON c.parent_id = t.id
)
SELECT id, root FROM tree`

	// lockMembersSQL locks the instances $1, in id order so that two
	// deletes of overlapping trees take their locks in one order, and
	// reads their status and parent as of the lock.
	lockMembersSQL = `SELECT id, status, parent_id FROM workflow_instances WHERE id = ANY ($1) ORDER BY id FOR UPDATE`

	// The rows of the instances $1, the instances' own rows last: the
	// foreign keys to an instance have no cascade except those of
	// idempotency keys, step records and descendant counts. The instances'
	// DELETE repeats the status check.
	deleteTreesHistorySQL   = `DELETE FROM workflow_history WHERE instance_id = ANY ($1)`
	deleteTreesTasksSQL     = `DELETE FROM workflow_tasks WHERE instance_id = ANY ($1)`
	deleteTreesInstancesSQL = `DELETE FROM workflow_instances
	WHERE id = ANY ($1) AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`
)

// descendants locks and reads the descendants of roots (which the caller
// holds locked). With skipLocked, a descendant another transaction holds
// is not waited for: it comes back not Locked. Without it, a descendant
// deleted meanwhile is left out.
func (q *querier) descendants(ctx context.Context, roots []string, skipLocked bool) ([]store.TreeMember, error) {
	rows, err := q.db.Query(ctx, descendantsSQL, roots)
	if err != nil {
		return nil, interpretError(err, "")
	}
	var members []store.TreeMember
	for rows.Next() {
		var m store.TreeMember
		if err := rows.Scan(&m.ID, &m.Root); err != nil {
			rows.Close()
			return nil, interpretError(err, "")
		}
		if m.ID != m.Root {
			members = append(members, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	if len(members) == 0 {
		return nil, nil
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	lock := lockMembersSQL
	if skipLocked {
		lock += " SKIP LOCKED"
	}
	rows, err = q.db.Query(ctx, lock, ids)
	if err != nil {
		return nil, interpretError(err, "")
	}
	type locked struct {
		status string
		parent *string
	}
	got := map[string]locked{}
	for rows.Next() {
		var (
			id string
			l  locked
		)
		if err := rows.Scan(&id, &l.status, &l.parent); err != nil {
			rows.Close()
			return nil, interpretError(err, "")
		}
		got[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	out := members[:0]
	for _, m := range members {
		l, ok := got[m.ID]
		if !ok && !skipLocked {
			continue // deleted meanwhile
		}
		m.Locked = ok
		if ok {
			m.Status = workflow.Status(l.status)
			if l.parent != nil {
				m.Parent = *l.parent
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// deleteTrees deletes the instances ids (locked, finished) with their
// history and tasks, and returns how many instance rows it deleted.
func (q *querier) deleteTrees(ctx context.Context, ids []string) (int64, error) {
	for _, stmt := range []string{deleteTreesHistorySQL, deleteTreesTasksSQL} {
		if _, err := q.db.Exec(ctx, stmt, ids); err != nil {
			return 0, interpretError(err, "")
		}
	}
	tag, err := q.db.Exec(ctx, deleteTreesInstancesSQL, ids)
	if err != nil {
		return 0, interpretError(err, "")
	}
	return tag.RowsAffected(), nil
}
