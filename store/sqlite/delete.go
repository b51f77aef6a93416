package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// DeleteInstance deletes a finished instance and its finished descendants
// with their history, tasks and idempotency keys (by their foreign key's
// cascade) in one write transaction: SQLite's single writer makes the
// checks and the deletes one step, and the instances' DELETE repeats the
// status check in its WHERE clause. See store.Querier.
func (q *querier) DeleteInstance(ctx context.Context, id string, expectedVersion *int64) error {
	return q.write(ctx, func(c dbtx) error {
		var (
			status  string
			version int64
		)
		err := c.QueryRowContext(ctx, `SELECT status, version FROM workflow_instances WHERE id = ?1`, id).Scan(&status, &version)
		if errors.Is(err, sql.ErrNoRows) {
			return store.NotFound(id)
		}
		if err != nil {
			return interpretError(ctx, err)
		}
		if err := store.CheckDeletable(id, workflow.Status(status), version, expectedVersion); err != nil {
			return err
		}
		members, err := descendants(ctx, c, []string{id})
		if err != nil {
			return err
		}
		ids, kept := store.DeletableTrees([]string{id}, members)
		if m, ok := kept[id]; ok {
			return store.LiveDescendant(id, m)
		}
		n, err := deleteTrees(ctx, c, ids)
		if err != nil {
			return err
		}
		if n != int64(len(ids)) {
			// Not reached: this transaction holds the write lock.
			return &store.ConflictError{ID: id, Expected: version, Actual: -1, Reason: "the workflow changed while it was being deleted"}
		}
		return nil
	})
}

// DeleteDefinition deletes every revision of name unless an instance of it
// is live, and keeps the highest revision in its tombstone; see
// store.DefinitionStore. It runs in one write transaction, as Create does:
// a create either committed before (and is seen here) or runs after (and
// finds no revision).
func (q *querier) DeleteDefinition(ctx context.Context, name string) error {
	return q.write(ctx, func(c dbtx) error {
		var latest sql.NullInt64
		if err := c.QueryRowContext(ctx, `SELECT max(revision) FROM workflow_definitions WHERE name = ?1`, name).Scan(&latest); err != nil {
			return interpretError(ctx, err)
		}
		if !latest.Valid {
			return fmt.Errorf("definition %q: %w", name, store.ErrNotFound)
		}
		var live bool
		if err := c.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_instances
			WHERE definition = ?1 AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED'))`, name).Scan(&live); err != nil {
			return interpretError(ctx, err)
		}
		if live {
			return fmt.Errorf("definition %q: %w (delete or finish them first)", name, store.ErrDefinitionInUse)
		}
		if _, err := c.ExecContext(ctx, `INSERT INTO workflow_definition_tombstones (name, revision) VALUES (?1, ?2)
			ON CONFLICT (name) DO UPDATE SET revision = max(revision, excluded.revision)`, name, latest.Int64); err != nil {
			return interpretError(ctx, err)
		}
		_, err := c.ExecContext(ctx, `DELETE FROM workflow_definitions WHERE name = ?1`, name)
		return interpretError(ctx, err)
	})
}

// checkRevision refuses a create that names a definition revision that is
// not stored (ErrNotFound; ErrStaleRevision under LatestRevision) or, under
// LatestRevision, one that is not the latest. It runs in the create's write
// transaction, so DeleteDefinition cannot slip in between.
func checkRevision(ctx context.Context, c dbtx, p store.CreateParams) error {
	named := p.Definition != "" && p.DefinitionRevision > 0
	if !named && !p.LatestRevision {
		return nil
	}
	var stored, newer bool
	if err := c.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM workflow_definitions WHERE name = ?1 AND revision = ?2),
		EXISTS (SELECT 1 FROM workflow_definitions WHERE name = ?1 AND revision > ?2)`,
		p.Definition, p.DefinitionRevision).Scan(&stored, &newer); err != nil {
		return interpretError(ctx, err)
	}
	switch {
	case p.LatestRevision && (newer || (named && !stored)):
		return store.StaleRevision(p)
	case named && !stored:
		return fmt.Errorf("definition %q revision %d: %w", p.Definition, p.DefinitionRevision, store.ErrNotFound)
	}
	return nil
}
