package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow/instance"
)

// putSearch stores search attributes of instance id, each replacing the
// one of its name, with the instance's creation time, and checks how many
// it has then: too many fail the write (and roll back its transaction).
// rows nil writes nothing.
func putSearch(ctx context.Context, c dbtx, id string, rows []instance.SearchValue) error {
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		if _, err := c.ExecContext(ctx, `INSERT INTO workflow_search (instance_id, name, value, kind, created_at)
			SELECT id, ?2, ?3, ?4, created_at FROM workflow_instances WHERE id = ?1
			ON CONFLICT (instance_id, name) DO UPDATE SET value = excluded.value, kind = excluded.kind`,
			id, r.Name, r.Text, string(r.Kind)); err != nil {
			return interpretError(ctx, err)
		}
	}
	var n int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM workflow_search WHERE instance_id = ?1`, id).Scan(&n); err != nil {
		return interpretError(ctx, err)
	}
	return store.CheckSearchCount(id, n)
}

// searchOf is the search attributes of the instance row alias as one JSON
// object, NULL for none (decodeSearch).
func searchOf(alias string) string {
	return `(SELECT json_group_object(s.name, CASE s.kind WHEN 'string' THEN s.value ELSE json(s.value) END) FROM workflow_search s WHERE s.instance_id = ` + alias + `.id HAVING count(*) > 0)`
}

// decodeSearch reads searchOf's column.
func decodeSearch(v *string) (map[string]json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*v), &m); err != nil {
		return nil, fmt.Errorf("sqlite: stored search attributes cannot be decoded: %w", err)
	}
	return m, nil
}
