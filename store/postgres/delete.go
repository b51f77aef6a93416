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

	// The instance's rows, children first: the foreign keys to the instance
	// have no cascade except idempotency_keys'. History rows of a finished
	// instance are the only ones its trigger lets go.
	deleteHistorySQL = `DELETE FROM workflow_history WHERE instance_id = $1`
	deleteTasksSQL   = `DELETE FROM workflow_tasks WHERE instance_id = $1`
	// deleteInstanceSQL repeats the checks in its WHERE clause, so the
	// write itself never deletes a live instance or another version.
	deleteInstanceSQL = `DELETE FROM workflow_instances
	WHERE id = $1 AND version = $2 AND status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`

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

// DeleteInstance deletes a finished instance with its history, tasks and
// idempotency key (by its foreign key's cascade), in one transaction. See
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
		// Child workflows (not yet in flowd) will be deleted here too, in
		// this transaction, before their parent.
		b := &pgx.Batch{}
		b.Queue(deleteHistorySQL, id)
		b.Queue(deleteTasksSQL, id)
		b.Queue(deleteInstanceSQL, id, version)
		br := tq.db.SendBatch(ctx, b)
		var deleted int64
		for i := range 3 {
			tag, err := br.Exec()
			if err != nil {
				_ = br.Close()
				return interpretError(err, id)
			}
			if i == 2 {
				deleted = tag.RowsAffected()
			}
		}
		if err := br.Close(); err != nil {
			return interpretError(err, id)
		}
		if deleted != 1 {
			// Not reached: the row is locked and was checked.
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
