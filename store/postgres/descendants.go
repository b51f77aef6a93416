package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/store"
)

// countDescendantSQL counts one more descendant of the top-level workflow
// $1 while it has fewer than $2 (migration 00018): the row lock of the
// count makes concurrent creators take turns, and each one checks the
// count its predecessor left. At the limit it raises FD430, which rolls
// back the create it belongs to.
const countDescendantSQL = `WITH c AS (
	INSERT INTO workflow_descendants AS d (root_id, descendants) VALUES ($1, 1)
	ON CONFLICT (root_id) DO UPDATE SET descendants = d.descendants + 1 WHERE d.descendants < $2
	RETURNING 1
)
SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM c)
	THEN flowd_descendant_limit(format('workflow %s already has %s descendants, its limit', $1::text, $2::integer)) END`

// SQLSTATEs of the count: FD430 raised by flowd_descendant_limit, and the
// foreign key of the count's row to its top-level workflow.
const (
	codeDescendantLimit      = "FD430"
	codeForeignKeyViolation  = "23503"
	descendantCountStatement = "count of descendants"
)

// descendantError maps the error of countDescendantSQL for d: the limit,
// or a top-level workflow that is not stored; anything else as every
// error is.
func descendantError(err error, d *store.DescendantCount) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeDescendantLimit:
			return &store.DescendantLimitError{Root: d.Root, Max: d.Max}
		case codeForeignKeyViolation:
			return fmt.Errorf("top-level workflow of the new instance: %w", store.NotFound(d.Root))
		}
	}
	return fmt.Errorf("%s: %w", descendantCountStatement, interpretError(err, d.Root))
}
