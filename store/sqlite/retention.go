package sqlite

import (
	"context"
	"encoding/json"

	"github.com/flowd/flowd/store"
)

// expiredFinishedSQL selects one batch of expired finished instances. ?1 is the
// cutoff of instances whose definition is not a key of ?2 (NULL keeps
// them); ?2 is a JSON object of definition names and their own cutoffs
// (null keeps that definition's instances); ?3, the latest cutoff, bounds
// the range read from the (status, updated_at) index for each finished
// status; ?4 is the limit.
const expiredFinishedSQL = `SELECT i.id FROM workflow_instances i
	LEFT JOIN json_each(?2) own ON own.key = i.definition
	WHERE i.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
	  AND i.updated_at < ?3
	  AND i.updated_at < CASE WHEN own.key IS NULL THEN ?1 ELSE own.value END
	LIMIT ?4`

// deleteFinished deletes one batch of expired finished instances, each
// with its descendants, in one write transaction: SQLite's single writer
// makes the selection and the deletes one step, so concurrent calls never
// see the same rows. An instance with a live descendant stays. See
// store.PruneInstances (p is checked).
func (q *querier) deleteFinished(ctx context.Context, p store.PruneParams) ([]string, error) {
	latest, due := p.Latest()
	if !due {
		return []string{}, nil
	}
	own := make(map[string]*int64, len(p.Definitions))
	for name, t := range p.Definitions {
		if t.IsZero() {
			own[name] = nil
		} else {
			us := micros(t)
			own[name] = &us
		}
	}
	ownJSON, err := json.Marshal(own)
	if err != nil {
		return nil, err
	}
	var before any // NULL keeps the instances it applies to
	if !p.Before.IsZero() {
		before = micros(p.Before)
	}
	ids := []string{}
	err = q.write(ctx, func(c dbtx) error {
		roots, err := queryIDs(ctx, c, expiredFinishedSQL, before, string(ownJSON), micros(latest), p.Limit)
		if err != nil || len(roots) == 0 {
			return err
		}
		members, err := descendants(ctx, c, roots)
		if err != nil {
			return err
		}
		ids, _ = store.DeletableTrees(roots, members)
		if len(ids) == 0 {
			return nil
		}
		_, err = deleteTrees(ctx, c, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
