package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyEach makes the writes in one write transaction, each in a savepoint
// of its own: a write that misses (ErrConflict, ErrNotFound) is rolled back
// to its savepoint and left out, any other error rolls back everything.
// See store.Applier.
func (q *querier) ApplyEach(ctx context.Context, writes []*store.Write) ([]*workflow.Instance, error) {
	if err := store.CheckEach(writes); err != nil {
		return nil, err
	}
	pas := make([]*preparedApply, len(writes))
	for i, w := range writes {
		pa, err := q.prepareApply(w)
		if err != nil {
			return nil, fmt.Errorf("write %d of %d: %w", i+1, len(writes), err)
		}
		pas[i] = pa
	}
	written := make([]*workflow.Instance, len(writes))
	if len(pas) == 0 {
		return written, nil
	}
	err := q.write(ctx, func(c dbtx) error {
		clear(written)
		for i, pa := range pas {
			inst, err := writeOrSkip(ctx, c, pa)
			if err != nil {
				return fmt.Errorf("write %d of %d: %w", i+1, len(pas), err)
			}
			written[i] = inst
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, pa := range pas {
		if written[i] != nil {
			pa.fill()
		}
	}
	return written, nil
}

// writeOrSkip makes pa's write in a savepoint of the transaction c holds:
// nil, nil when it missed (rolled back to the savepoint).
func writeOrSkip(ctx context.Context, c dbtx, pa *preparedApply) (*workflow.Instance, error) {
	if _, err := c.ExecContext(ctx, "SAVEPOINT flowd_each"); err != nil {
		return nil, interpretError(ctx, err)
	}
	inst, err := pa.write(ctx, c)
	missed := errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)
	if missed {
		if _, rerr := c.ExecContext(ctx, "ROLLBACK TO flowd_each"); rerr != nil {
			return nil, interpretError(ctx, rerr)
		}
	}
	if _, rerr := c.ExecContext(ctx, "RELEASE flowd_each"); rerr != nil {
		return nil, interpretError(ctx, rerr)
	}
	if missed {
		return nil, nil
	}
	return inst, err
}
