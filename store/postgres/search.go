package postgres

import (
	"context"

	"github.com/flowd/flowd/store"
)

// putSearchSQL sets search attributes of instance $1 (names, values and
// kinds in $2–$4), each replacing the one of its name, with the instance's
// creation time, and counts the attributes it has then.
const putSearchSQL = `WITH a AS (
	INSERT INTO workflow_search (instance_id, name, value, kind, created_at)
	SELECT i.id, a.name, a.value, a.kind, i.created_at
	FROM workflow_instances i, unnest($2::text[], $3::text[], $4::text[]) AS a (name, value, kind)
	WHERE i.id = $1
	ON CONFLICT (instance_id, name) DO UPDATE SET value = EXCLUDED.value, kind = EXCLUDED.kind
	RETURNING (xmax = 0) AS inserted
)
SELECT (SELECT count(*) FROM workflow_search WHERE instance_id = $1) + (SELECT count(*) FROM a WHERE inserted)`

// putSearch stores w.Search, in the transaction of w's write (which holds
// the instance's row): a write that would leave the instance with too many
// attributes fails, and its transaction with it.
func putSearch(ctx context.Context, db dbtx, w *store.Write) error {
	rows := store.SearchRows(w.Search)
	names, values, kinds := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		names[i], values[i], kinds[i] = r.Name, r.Text, string(r.Kind)
	}
	var n int
	if err := db.QueryRow(ctx, putSearchSQL, w.ID, names, values, kinds).Scan(&n); err != nil {
		return interpretError(err, w.ID)
	}
	return store.CheckSearchCount(w.ID, n)
}
