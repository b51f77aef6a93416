package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

const (
	// lockForDeleteSQL locks the instance against every other writer
	// (FOR UPDATE: a delete also conflicts with the key-share locks of rows
	// that reference it) before its status and version are checked.
	lockForDeleteSQL = `SELECT status, version FROM workflow_instances WHERE id = $1 FOR UPDATE`

	// deleteDefinitionSQL deletes every revision of a definition and keeps
	// the highest one in its tombstone, so that PutDefinition never hands
	// out a revision number twice. Its DELETE takes the revisions' row
	// locks: it waits for the creates that hold one (createRevision), and
	// creates that come later find no revision.
	deleteDefinitionSQL = `WITH del AS (
	DELETE FROM workflow_definitions WHERE name = $1 RETURNING revision
), tomb AS (
	INSERT INTO workflow_definition_tombstones (name, revision)
	SELECT $1, max(revision) FROM del HAVING count(*) > 0
	ON CONFLICT (name) DO UPDATE SET revision = GREATEST(workflow_definition_tombstones.revision, EXCLUDED.revision)
)
SELECT count(*) FROM del`

	// liveInstancesSQL runs after deleteDefinitionSQL, in a statement of its
	// own: under read committed it takes a fresh snapshot, so it sees every
	// instance whose create committed while the DELETE waited for its lock.
	liveInstancesSQL = `SELECT EXISTS (SELECT 1 FROM workflow_instances
	WHERE definition = $1 AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED'))`
)

// DeleteInstance deletes a finished instance and its finished descendants
// with their history, tasks and idempotency keys (by their foreign key's
// cascade), in one transaction that locks them all first. See
// store.Querier.
func (q *querier) DeleteInstance(ctx context.Context, id string, expectedVersion *int64) error {
	if !storableText(id) {
		return store.NotFound(id)
	}
	return q.atomically(ctx, func(tq *querier) error {
		var (
			status  string
			version int64
		)
		if err := tq.db.QueryRow(ctx, lockForDeleteSQL, id).Scan(&status, &version); err != nil {
			return interpretError(err, id)
		}
		if err := store.CheckDeletable(id, workflow.Status(status), version, expectedVersion); err != nil {
			return err
		}
		members, err := tq.descendants(ctx, []string{id}, false)
		if err != nil {
			return err
		}
		ids, kept := store.DeletableTrees([]string{id}, members)
		if m, ok := kept[id]; ok {
			return store.LiveDescendant(id, m)
		}
		deleted, err := tq.deleteTrees(ctx, ids)
		if err != nil {
			return err
		}
		if deleted != int64(len(ids)) {
			// Not reached: the rows are locked and were checked.
			return &store.ConflictError{ID: id, Expected: version, Actual: -1, Reason: "the workflow changed while it was being deleted"}
		}
		return nil
	})
}

// DeleteDefinition deletes every revision of name unless an instance of it
// is live; see store.DefinitionStore.
func (s *Store) DeleteDefinition(ctx context.Context, name string) error {
	if !storableText(name) {
		return fmt.Errorf("definition %q: %w", name, store.ErrNotFound)
	}
	return s.querier.runTx(ctx, pgx.ReadCommitted, func(q *querier) error {
		var deleted int64
		if err := q.db.QueryRow(ctx, deleteDefinitionSQL, name).Scan(&deleted); err != nil {
			return interpretError(err, "")
		}
		if deleted == 0 {
			return fmt.Errorf("definition %q: %w", name, store.ErrNotFound)
		}
		var live bool
		if err := q.db.QueryRow(ctx, liveInstancesSQL, name).Scan(&live); err != nil {
			return interpretError(err, "")
		}
		if live {
			return fmt.Errorf("definition %q: %w (delete or finish them first)", name, store.ErrDefinitionInUse)
		}
		return nil
	})
}
