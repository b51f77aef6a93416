package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyEach makes the writes in one transaction, each as an applySQL
// statement in a savepoint of its own, all sent in one pipeline with the
// COMMIT. A write whose guard misses without raising writes nothing and
// is left out. One that raises (a miss after some of its task rows were
// updated) aborts the pipeline there: the transaction is rolled back to
// that write's savepoint and the writes after it are sent again, so each
// such miss costs a round trip. Any other failure rolls back everything.
// See store.Applier.
func (q *querier) ApplyEach(ctx context.Context, writes []*store.Write) ([]*workflow.Instance, error) {
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
	written := make([]*workflow.Instance, len(writes))
	if len(pas) == 0 {
		return written, nil
	}
	if q.pool == nil {
		return nil, errOwnTransaction("ApplyEach")
	}
	err := q.inPipelinedTx(ctx, func(conn *pgxpool.Conn) error {
		for from, first := 0, true; ; first = false {
			next, err := sendEach(ctx, conn, pas[from:], written[from:], first, from)
			if err != nil || next < 0 {
				return err
			}
			from += next + 1
		}
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

// sendEach sends pas, each in a savepoint, and the COMMIT in one pipeline
// on conn (after BEGIN when first, else after releasing the savepoint of
// the write that raised before) and records the instances written. It
// returns -1 once committed, or the index of a write that raised a miss:
// the transaction is then rolled back to that write's savepoint, and the
// writes after it are to be sent again.
func sendEach(ctx context.Context, conn *pgxpool.Conn, pas []*preparedApply, written []*workflow.Instance, first bool, offset int) (raised int, err error) {
	b := &pgx.Batch{}
	if first {
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		b.Queue(genericPlansSQL)
	} else {
		b.Queue("RELEASE flowd_each")
	}
	for _, pa := range pas {
		b.Queue("SAVEPOINT flowd_each")
		b.Queue(pa.sql(false), pa.args...)
		b.Queue("RELEASE flowd_each")
	}
	b.Queue(defaultPlansSQL)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	raised, err = readEach(br, pas, written, first, offset)
	if cerr := br.Close(); err == nil && raised < 0 && cerr != nil {
		err = interpretError(cerr, "")
	}
	switch {
	case err != nil:
		// Nothing was committed, or the COMMIT's answer was lost.
		return 0, commitOutcome(err)
	case raised < 0:
		return -1, nil
	}
	if _, err := conn.Exec(ctx, "ROLLBACK TO flowd_each"); err != nil {
		return 0, interpretError(err, "")
	}
	return raised, nil
}

// readEach reads the answers of sendEach's pipeline: the index of the
// write that raised a miss (-1: none), or the error that fails them all
// (naming the write by its place in ApplyEach's, offset before pas).
func readEach(br pgx.BatchResults, pas []*preparedApply, written []*workflow.Instance, first bool, offset int) (int, error) {
	if _, err := br.Exec(); err != nil { // BEGIN, or the RELEASE
		return 0, interpretError(err, "")
	}
	if first {
		if err := execSetting(br); err != nil { // genericPlansSQL
			return 0, err
		}
	}
	for i, pa := range pas {
		if _, err := br.Exec(); err != nil { // SAVEPOINT
			return 0, interpretError(err, "")
		}
		row := &scanOutcome{row: br.QueryRow()}
		inst, err := pa.result(row)
		missed := errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)
		switch {
		case row.err != nil && missed:
			return i, nil
		case err != nil && !missed:
			return 0, fmt.Errorf("write %d: %w", offset+i+1, err)
		}
		// nil for a miss that raised nothing
		written[i] = inst
		if _, err := br.Exec(); err != nil { // RELEASE
			return 0, interpretError(err, "")
		}
	}
	if err := execSetting(br); err != nil { // defaultPlansSQL
		return 0, err
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return 0, interpretError(err, "")
	}
	return -1, nil
}

// scanOutcome is a row that remembers whether reading it failed: a
// statement that raised, as opposed to one that ran and reported a miss.
type scanOutcome struct {
	row pgx.Row
	err error
}

func (s *scanOutcome) Scan(dest ...any) error {
	s.err = s.row.Scan(dest...)
	return s.err
}
