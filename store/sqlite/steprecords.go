package sqlite

import (
	"context"

	"github.com/flowd/flowd/store"
)

// putStepRecords writes what sr says of the steps' records of instance id
// (store.StepRecords), inside the caller's write transaction.
func putStepRecords(ctx context.Context, c dbtx, id string, sr store.StepRecords) error {
	if sr.All {
		if _, err := c.ExecContext(ctx, `DELETE FROM workflow_steps WHERE instance_id = ?1`, id); err != nil {
			return interpretError(ctx, err)
		}
	}
	for _, step := range sr.Drop {
		if _, err := c.ExecContext(ctx, `DELETE FROM workflow_steps WHERE instance_id = ?1 AND step_id = ?2`, id, step); err != nil {
			return interpretError(ctx, err)
		}
	}
	for i, step := range sr.IDs {
		if _, err := c.ExecContext(ctx, `INSERT INTO workflow_steps (instance_id, step_id, record) VALUES (?1, ?2, ?3)
			ON CONFLICT (instance_id, step_id) DO UPDATE SET record = excluded.record`, id, step, string(sr.Records[i])); err != nil {
			return interpretError(ctx, err)
		}
	}
	return nil
}
