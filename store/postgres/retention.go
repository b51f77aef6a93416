package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
)

// expiredFinishedSQL locks one batch of expired finished instances (SKIP
// LOCKED: a row another node's sweep, a DeleteInstance or a retry holds
// is left alone, so nodes never wait for each other nor delete the same
// rows). deleteFinished then deletes them with their descendants.
//
// $1 is the cutoff of instances whose definition is not in $2 (NULL keeps
// them); $2 and $3 pair definition names with their own cutoffs (NULL
// keeps that definition's instances); $4, the latest cutoff, bounds the
// scan of the partial index of finished instances (migration 00008),
// which yields the oldest first; $5 is the limit. No ORDER BY: after the
// join with the cutoffs it would sort every expired row of a backlog for
// each batch, for an order the index gives anyway.
const expiredFinishedSQL = `WITH own (definition, before) AS (
	SELECT * FROM unnest($2::text[], $3::timestamptz[])
)
SELECT i.id FROM workflow_instances i
LEFT JOIN own ON own.definition = i.definition
WHERE i.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
  AND i.updated_at < $4
  AND i.updated_at < CASE WHEN own.definition IS NULL THEN $1::timestamptz ELSE own.before END
LIMIT $5
FOR UPDATE OF i SKIP LOCKED`

// deleteFinished deletes one batch of expired finished instances (checked
// p of store.PruneInstances), each with its descendants, in one
// transaction; an instance with a descendant that is live, or held by
// another transaction, stays for a later sweep.
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
	ids := []string{}
	err := s.querier.runTx(ctx, pgx.ReadCommitted, func(q *querier) error {
		rows, err := q.db.Query(ctx, expiredFinishedSQL, nullTime(p.Before), names, cutoffs, latest, p.Limit)
		if err != nil {
			return interpretError(err, "")
		}
		roots, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return interpretError(err, "")
		}
		if len(roots) == 0 {
			return nil
		}
		members, err := q.descendants(ctx, roots, true)
		if err != nil {
			return err
		}
		doomed, _ := store.DeletableTrees(roots, members)
		if len(doomed) == 0 {
			return nil
		}
		if _, err := q.deleteTrees(ctx, doomed); err != nil {
			return err
		}
		ids = doomed
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
