package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The reads of a batch. The instances are chosen oldest updated_at first
// (never UPDATE … LIMIT, which PostgreSQL does not have). Nothing is
// locked: the batch's writes are guarded by what it read. $4, when given,
// keeps those ids only (by primary key).
var (
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
)

// BatchInstances reads the instances of a batch and their tasks (see
// store.BatchReader).
func (q *querier) BatchInstances(ctx context.Context, p store.BatchReadParams) ([]store.BatchItem, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
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
	tasks, err := q.queryTasks(ctx, batchTasksSQL, ids)
	if err != nil {
		return nil, err
	}
	store.GroupTasks(items, tasks)
	return items, nil
}
