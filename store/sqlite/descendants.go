package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowd/flowd/store"
)

// countDescendantSQL counts one more descendant of ?1 while it has fewer
// than ?2 (migration 00016): no row changes at the limit.
const countDescendantSQL = `INSERT INTO workflow_descendants (root_id, descendants) VALUES (?1, 1)
ON CONFLICT (root_id) DO UPDATE SET descendants = descendants + 1 WHERE descendants < ?2`

// countDescendant counts the instance being created as a descendant of
// d.Root (store.CreateParams.Descendant), in the create's transaction: the
// single writer makes the count exact.
func countDescendant(ctx context.Context, c dbtx, d *store.DescendantCount) error {
	if d == nil {
		return nil
	}
	var one int
	err := c.QueryRowContext(ctx, `SELECT 1 FROM workflow_instances WHERE id = ?1`, d.Root).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("top-level workflow of the new instance: %w", store.NotFound(d.Root))
	}
	if err != nil {
		return interpretError(ctx, err)
	}
	res, err := c.ExecContext(ctx, countDescendantSQL, d.Root, d.Max)
	if err != nil {
		return interpretError(ctx, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return interpretError(ctx, err)
	} else if n == 0 {
		return &store.DescendantLimitError{Root: d.Root, Max: d.Max}
	}
	return nil
}
