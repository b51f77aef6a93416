package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyEach sends the writes as applySQL statements (which write nothing
// and raise nothing when their guard misses) in one pipeline with a single
// Sync: one implicit transaction, in which the writes whose guards hold are
// made together. A statement that fails on the server (a slot guard, a
// constraint) aborts the transaction: nothing is written and its error is
// returned. See store.Applier.
func (q *querier) ApplyEach(ctx context.Context, writes []*store.Write) (written []*workflow.Instance, err error) {
	defer q.settle(&err) // an implicit transaction of its own
	if err := store.CheckEach(writes); err != nil {
		return nil, err
	}
	pas := make([]*preparedApply, len(writes))
	for i, w := range writes {
		pa, err := q.prepareApply(ctx, w, store.WriteActor(ctx, w.Actor))
		if err != nil {
			return nil, fmt.Errorf("write %d of %d: %w", i+1, len(writes), err)
		}
		pas[i] = pa
	}
	written = make([]*workflow.Instance, len(writes))
	if len(pas) == 0 {
		return written, nil
	}
	b := &pgx.Batch{}
	for _, pa := range pas {
		b.Queue(pa.sql(false), pa.args...)
	}
	br := q.db.SendBatch(ctx, b)
	var failed error
	for i, pa := range pas {
		row := &scanOutcome{row: br.QueryRow()}
		inst, err := pa.result(row)
		switch {
		case failed != nil:
		case row.err != nil:
			// The statement failed: the transaction is aborted.
			failed = fmt.Errorf("write %d of %d: %w", i+1, len(pas), err)
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
			// Missed: nothing of this write was made.
		case err != nil:
			failed = fmt.Errorf("write %d of %d: %w", i+1, len(pas), err)
		default:
			written[i] = inst
		}
	}
	if cerr := br.Close(); failed == nil && cerr != nil {
		failed = interpretError(cerr, "")
	}
	if failed != nil {
		return nil, failed
	}
	for i, pa := range pas {
		if written[i] != nil {
			pa.fill()
		}
	}
	return written, nil
}

// scanOutcome is a row that remembers whether reading it failed: a
// statement that failed on the server, as opposed to one that ran and
// reported a miss.
type scanOutcome struct {
	row pgx.Row
	err error
}

func (s *scanOutcome) Scan(dest ...any) error {
	s.err = s.row.Scan(dest...)
	return s.err
}
