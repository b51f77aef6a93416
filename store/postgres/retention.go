package postgres

import (
	"context"
	"time"

	"github.com/flowd/flowd/store"
)

// deleteFinishedSQL deletes one batch of expired finished instances in one
// statement: it locks them (SKIP LOCKED: a row another node's sweep, a
// DeleteInstance or a retry holds is left alone, so nodes never wait for
// each other nor delete the same rows), deletes their history and tasks,
// then the instances (their idempotency keys go by the foreign key's
// cascade). The NO ACTION foreign keys of history and tasks are checked at
// the statement's end, when the children are gone too.
//
// $1 is the cutoff of instances whose definition is not in $2 (NULL keeps
// them); $2 and $3 pair definition names with their own cutoffs (NULL
// keeps that definition's instances); $4, the latest cutoff, bounds the
// scan of the partial index of finished instances (migration 00008),
// which yields the oldest first; $5 is the limit. No ORDER BY: after the
// join with the cutoffs it would sort every expired row of a backlog for
// each batch, for an order the index gives anyway.
const deleteFinishedSQL = `WITH own (definition, before) AS (
	SELECT * FROM unnest($2::text[], $3::timestamptz[])
), doomed AS (
	SELECT i.id FROM workflow_instances i
	LEFT JOIN own ON own.definition = i.definition
	WHERE i.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
	  AND i.updated_at < $4
	  AND i.updated_at < CASE WHEN own.definition IS NULL THEN $1::timestamptz ELSE own.before END
	LIMIT $5
	FOR UPDATE OF i SKIP LOCKED
), history AS (
	DELETE FROM workflow_history WHERE instance_id = ANY (ARRAY(SELECT id FROM doomed))
), tasks AS (
	DELETE FROM workflow_tasks WHERE instance_id = ANY (ARRAY(SELECT id FROM doomed))
)
DELETE FROM workflow_instances WHERE id = ANY (ARRAY(SELECT id FROM doomed))
RETURNING id`

// deleteFinished deletes one batch of expired finished instances (checked
// p of store.PruneInstances).
func (s *Store) deleteFinished(ctx context.Context, p store.PruneParams) ([]string, error) {
	latest, due := p.Latest()
	if !due {
		return []string{}, nil
	}
	names := make([]string, 0, len(p.Definitions))
	cutoffs := make([]*time.Time, 0, len(p.Definitions))
	for name, t := range p.Definitions {
		if !storableText(name) {
			continue // no stored definition has such a name
		}
		names = append(names, name)
		cutoffs = append(cutoffs, nullTime(t))
	}
	rows, err := s.pool.Query(ctx, deleteFinishedSQL, nullTime(p.Before), names, cutoffs, latest, p.Limit)
	if err != nil {
		return nil, interpretError(err, "")
	}
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, interpretError(err, "")
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return ids, nil
}
