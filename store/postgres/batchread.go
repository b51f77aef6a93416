package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The reads of a batch. The instances are chosen oldest updated_at first
// (never UPDATE … LIMIT, which PostgreSQL does not have); with a lock, FOR
// UPDATE SKIP LOCKED: concurrent batches skip each other's rows instead of
// waiting or both taking one. $4, when given, keeps those ids only (by
// primary key).
const (
	batchInstancesSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
	WHERE status = $1 AND updated_at < $2
	ORDER BY updated_at, id
	LIMIT $3`
	batchInstancesIDsSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
	WHERE id = ANY ($4::text[]) AND status = $1 AND updated_at < $2
	ORDER BY updated_at, id
	LIMIT $3`
	batchTasksSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks
	WHERE instance_id = ANY ($1::text[])
	ORDER BY instance_id, step_id COLLATE "C", iteration`
	// batchTaskCountsSQL counts the task rows of each instance, locked or
	// not: an instance with fewer rows locked has one another transaction
	// holds.
	batchTaskCountsSQL = `SELECT instance_id, count(*) FROM workflow_tasks
	WHERE instance_id = ANY ($1::text[]) GROUP BY instance_id`
	// batchTasksLockedSQL locks the task rows no other transaction holds,
	// in the order of batchTasksSQL.
	batchTasksLockedSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks
	WHERE instance_id = ANY ($1::text[])
	ORDER BY instance_id, step_id COLLATE "C", iteration
	FOR UPDATE SKIP LOCKED`
)

// BatchInstances reads the instances of a batch and their tasks: in
// a transaction with p.Lock, those no other transaction holds, locked,
// instance rows first and never waiting (see store.BatchReader).
func (q *querier) BatchInstances(ctx context.Context, p store.BatchReadParams) ([]store.BatchItem, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	lock := p.Lock && q.pool == nil // on the pool a lock ends with its statement
	sql, args := batchInstancesSQL, []any{string(p.Status), ceilMicro(p.UpdatedBefore), p.Limit}
	if len(p.IDs) > 0 {
		only := make([]string, 0, len(p.IDs))
		for _, id := range p.IDs {
			if storableText(id) { // one that cannot be stored is no instance
				only = append(only, id)
			}
		}
		sql, args = batchInstancesIDsSQL, append(args, only)
	}
	if lock {
		sql += " FOR UPDATE SKIP LOCKED"
	}
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpretError(err, "")
	}
	insts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*workflow.Instance, error) { return scanInstance(row) })
	if err != nil {
		return nil, interpretError(err, "")
	}
	items := make([]store.BatchItem, 0, len(insts))
	ids := make([]string, len(insts))
	for i, inst := range insts {
		items = append(items, store.BatchItem{Instance: inst})
		ids[i] = inst.ID
	}
	if len(ids) == 0 {
		return items, nil
	}
	if !lock {
		tasks, err := q.queryTasks(ctx, batchTasksSQL, ids)
		if err != nil {
			return nil, err
		}
		store.GroupTasks(items, tasks)
		return items, nil
	}
	return q.lockBatchTasks(ctx, items, ids)
}

// lockBatchTasks locks the task rows of the locked instances items (ids)
// and leaves out the instances with a row another transaction holds.
func (q *querier) lockBatchTasks(ctx context.Context, items []store.BatchItem, ids []string) ([]store.BatchItem, error) {
	rows, err := q.db.Query(ctx, batchTaskCountsSQL, ids)
	if err != nil {
		return nil, interpretError(err, "")
	}
	counts := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return nil, interpretError(err, "")
		}
		counts[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	tasks, err := q.queryTasks(ctx, batchTasksLockedSQL, ids)
	if err != nil {
		return nil, err
	}
	store.GroupTasks(items, tasks)
	kept := items[:0]
	for _, it := range items {
		if len(it.Tasks) == counts[it.Instance.ID] {
			kept = append(kept, it)
		}
	}
	return kept, nil
}
