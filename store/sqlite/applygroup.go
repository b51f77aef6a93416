package sqlite

import (
	"context"
	"fmt"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyGroup writes creates and writes (in store.GroupOrder) and then makes
// the claim, in one write transaction; any failure or miss of a create or
// write rolls all of it back, a miss of the claim's flow guards leaves the
// claim out. The creates' and writes' tasks and the claim's leases are
// filled in only when all of it is written. See store.TaskQuerier.
func (q *querier) ApplyGroup(ctx context.Context, creates []store.CreateParams, writes []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	if err := store.CheckNoSearch(writes); err != nil {
		return nil, nil, err
	}
	if claim != nil {
		claim.Claimed, claim.HeldBack = nil, store.HeldBack{}
		if err := claim.Params.Check(); err != nil {
			return nil, nil, err
		}
	}
	n := len(creates) + len(writes)
	// Each create fills in copies of its tasks.
	copies := make([][]*store.Task, len(creates))
	for i := range creates {
		for _, t := range creates[i].Tasks {
			if t == nil {
				return nil, nil, fmt.Errorf("create %d of %d: %w: nil task", i+1, n, store.ErrInvalidArgument)
			}
			c := *t
			copies[i] = append(copies[i], &c)
		}
	}
	pas := make([]*preparedApply, len(writes))
	for i, w := range writes {
		if w == nil {
			return nil, nil, fmt.Errorf("%w: write %d of %d is nil", store.ErrInvalidArgument, len(creates)+i+1, n)
		}
		pa, err := q.prepareApply(w)
		if err != nil {
			return nil, nil, fmt.Errorf("write %d of %d: %w", len(creates)+i+1, n, err)
		}
		pas[i] = pa
	}
	created := make([]*workflow.Instance, len(creates))
	written := make([]*workflow.Instance, len(writes))
	var (
		claimed []store.Claimable
		held    store.HeldBack
	)
	before := store.GroupOrder(creates, writes)
	err := q.write(ctx, func(c dbtx) error {
		tq := q.on(c)
		applyWrites := func(first bool) error {
			for i, pa := range pas {
				if before[i] != first {
					continue
				}
				inst, err := pa.write(ctx, c)
				if err != nil {
					return fmt.Errorf("write %d of %d: %w", len(creates)+i+1, n, err)
				}
				written[i] = inst
			}
			return nil
		}
		if err := applyWrites(true); err != nil {
			return err
		}
		for i, p := range creates {
			p.Tasks = copies[i]
			inst, err := tq.Create(ctx, p)
			if err != nil {
				return fmt.Errorf("create %d of %d: %w", i+1, n, err)
			}
			created[i] = inst
		}
		if err := applyWrites(false); err != nil {
			return err
		}
		if claim == nil {
			return nil
		}
		var err error
		claimed, held, _, err = q.claimOn(ctx, c, claim.Params)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range creates {
		for j, t := range creates[i].Tasks {
			*t = *copies[i][j]
		}
	}
	for _, pa := range pas {
		pa.fill()
	}
	if claim != nil {
		claim.Claimed, claim.HeldBack = claimed, held
	}
	return created, written, nil
}
