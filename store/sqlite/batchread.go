package sqlite

import (
	"context"
	"encoding/json"

	"github.com/flowd/flowd/store"
)

// The reads of a batch: the instances oldest updated_at first (?4, when
// given, keeps those ids only), then the tasks of those chosen. Ids travel
// as one JSON array parameter, never as SQL text.
var (
	batchInstancesSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
	WHERE status = ?1 AND updated_at < ?2
	ORDER BY updated_at, id
	LIMIT ?3`
	batchInstancesIDsSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
	WHERE id IN (SELECT value FROM json_each(?4)) AND status = ?1 AND updated_at < ?2
	ORDER BY updated_at, id
	LIMIT ?3`
	batchTasksSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks
	WHERE instance_id IN (SELECT value FROM json_each(?1))
	ORDER BY instance_id, step_id, iteration`
)

// BatchInstances reads the instances of a batch and their tasks. It takes
// no lock: inside a transaction nothing else writes (one writer), and
// outside one the engine's guarded writes check what it read.
func (q *querier) BatchInstances(ctx context.Context, p store.BatchReadParams) ([]store.BatchItem, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	query, args := batchInstancesSQL, []any{string(p.Status), micros(p.UpdatedBefore), p.Limit}
	if len(p.IDs) > 0 {
		only, err := json.Marshal(p.IDs)
		if err != nil {
			return nil, err
		}
		query, args = batchInstancesIDsSQL, append(args, string(only))
	}
	rows, err := q.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	items := []store.BatchItem{}
	var ids []string
	for rows.Next() {
		inst, err := scanInstance(rows)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		items = append(items, store.BatchItem{Instance: inst})
		ids = append(ids, inst.ID)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	if len(ids) == 0 {
		return items, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	tasks, err := queryTasks(ctx, q.read, batchTasksSQL, string(list))
	if err != nil {
		return nil, err
	}
	store.GroupTasks(items, tasks)
	return items, nil
}
