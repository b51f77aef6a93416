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

// deleteFinished deletes one batch of expired finished instances in one
// write transaction: SQLite's single writer makes the selection and the
// deletes one step, so concurrent calls never see the same rows. See
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
		var err error
		if ids, err = queryIDs(ctx, c, expiredFinishedSQL, before, string(ownJSON), micros(latest), p.Limit); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		// The ids travel as one JSON array parameter, never as SQL text.
		// Children first, as in DeleteInstance; the idempotency keys go by
		// their foreign key's cascade.
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		for _, stmt := range []string{
			`DELETE FROM workflow_history WHERE instance_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM workflow_tasks WHERE instance_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM workflow_instances WHERE id IN (SELECT value FROM json_each(?1))`,
		} {
			if _, err := c.ExecContext(ctx, stmt, string(list)); err != nil {
				return interpretError(ctx, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
