package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// ApplyGroup writes creates and writes as one implicit transaction: their
// statements go out in one pipeline with a single Sync, so that an error in
// any of them rolls back all of them. Creates run as createStrict statements and writes
// as applyStrictSQL (or applyOneStrictSQL), which raise FD409 for an instance not created or a
// write that missed: there is no partial result. See store.TaskQuerier.
//
// With a claim it is an explicit transaction in two pipelines: BEGIN, the
// creates, the writes and the claim query (claimWithInstancesSQL); then
// the claim's leases and COMMIT (leaseLocked).
func (q *querier) ApplyGroup(ctx context.Context, creates []store.CreateParams, writes []*store.Write, claim *store.GroupClaim) ([]*workflow.Instance, []*workflow.Instance, error) {
	if err := store.CheckNoSearch(writes); err != nil {
		return nil, nil, err
	}
	g, err := q.prepareGroup(ctx, creates, writes)
	if err != nil {
		return nil, nil, err
	}
	var claimSQL string
	var claimArgv []any
	if claim != nil {
		claim.Claimed, claim.HeldBack = nil, store.HeldBack{}
		n, args, err := claimArgs(claim.Params)
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			claim = nil // no queue: nothing to lock
		} else {
			claimSQL, claimArgv = claimWithInstancesSQL(n, claim.Params.Limit), args
		}
	}
	switch {
	case claim == nil:
		if err := g.send(ctx, q.db); err != nil {
			if q.pool != nil {
				err = commitOutcome(err) // an implicit transaction of its own
			}
			return nil, nil, err
		}
	case q.pool == nil:
		return nil, nil, errOwnTransaction("ApplyGroup with a claim")
	default:
		var held store.HeldBack
		err := q.inPipelinedTx(ctx, func(conn *pgxpool.Conn) error {
			b := &pgx.Batch{}
			b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
			g.queue(b)
			b.Queue(claimSQL, claimArgv...)
			br := conn.SendBatch(ctx, b)
			var locked []store.Claimable
			_, err := br.Exec()
			if err != nil {
				err = interpretError(err, "")
			} else if err = g.read(br); err == nil {
				locked, err = readClaimables(br)
			}
			if cerr := br.Close(); err == nil && cerr != nil {
				err = interpretError(cerr, "")
			}
			if err != nil {
				return err
			}
			claim.Claimed, held, _, err = leaseLocked(ctx, conn, locked, claim.Params, q.timestamp())
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		claim.HeldBack = held
	}
	return g.results()
}

// preparedGroup is a checked ApplyGroup's statements and, once read, their
// results.
type preparedGroup struct {
	pcs     []*preparedCreate
	pas     []*preparedApply
	created []bool
	written []*workflow.Instance
	// before says which writes go ahead of the creates (store.GroupOrder).
	before []bool
	// counts are the creates' descendant counts, written last: the
	// count of a top-level workflow is the one row every creator of its
	// descendants waits for, so it is held for the shortest time.
	counts []*store.DescendantCount
}

func (q *querier) prepareGroup(ctx context.Context, creates []store.CreateParams, writes []*store.Write) (*preparedGroup, error) {
	n := len(creates) + len(writes)
	g := &preparedGroup{
		pcs: make([]*preparedCreate, len(creates)), pas: make([]*preparedApply, len(writes)),
		created: make([]bool, len(creates)), written: make([]*workflow.Instance, len(writes)),
		before: store.GroupOrder(creates, writes),
	}
	for i, p := range creates {
		p.Actor = store.WriteActor(ctx, p.Actor)
		pc, err := q.prepareCreate(p)
		if err != nil {
			return nil, fmt.Errorf("create %d of %d: %w", i+1, n, err)
		}
		g.pcs[i] = pc
		if pc.p.Descendant != nil {
			g.counts = append(g.counts, pc.p.Descendant)
		}
	}
	for i, w := range writes {
		if w == nil {
			return nil, fmt.Errorf("%w: write %d of %d is nil", store.ErrInvalidArgument, len(creates)+i+1, n)
		}
		pa, err := q.prepareApply(ctx, w, store.WriteActor(ctx, w.Actor))
		if err != nil {
			return nil, fmt.Errorf("write %d of %d: %w", len(creates)+i+1, n, err)
		}
		g.pas[i] = pa
	}
	return g, nil
}

func (g *preparedGroup) empty() bool { return len(g.pcs)+len(g.pas) == 0 }

// queue adds the group's statements to b, in the group's order, the
// writes under generic plans (genericPlansSQL).
func (g *preparedGroup) queue(b *pgx.Batch) {
	if len(g.pas) > 0 {
		b.Queue(genericPlansSQL)
	}
	g.queueWrites(b, true)
	for _, pc := range g.pcs {
		b.Queue(pc.strict, pc.args...)
	}
	g.queueWrites(b, false)
	for _, d := range g.counts {
		b.Queue(countDescendantSQL, d.Root, d.Max)
	}
	if len(g.pas) > 0 {
		b.Queue(defaultPlansSQL)
	}
}

// queueWrites adds the writes that go before the creates (before), or
// those that go after them.
func (g *preparedGroup) queueWrites(b *pgx.Batch, before bool) {
	for i, pa := range g.pas {
		if g.before[i] == before {
			b.Queue(pa.sql(true), pa.args...)
		}
	}
}

// send writes the group in one pipeline on db (an implicit transaction, or
// part of the caller's) and reads the results.
func (g *preparedGroup) send(ctx context.Context, db dbtx) error {
	if g.empty() {
		return nil
	}
	b := &pgx.Batch{}
	g.queue(b)
	br := db.SendBatch(ctx, b)
	err := g.read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = interpretError(cerr, "")
	}
	return err
}

// read reads the results of the statements queue added: the first error.
func (g *preparedGroup) read(br pgx.BatchResults) error {
	var firstErr error
	n := len(g.pcs) + len(g.pas)
	plans := func() {
		if err := execSetting(br); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if len(g.pas) > 0 {
		plans()
	}
	writes := func(before bool) {
		for i, pa := range g.pas {
			if g.before[i] != before {
				continue
			}
			inst, err := pa.result(br.QueryRow())
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("write %d of %d: %w", len(g.pcs)+i+1, n, err)
			}
			g.written[i] = inst
		}
	}
	writes(true)
	for i, pc := range g.pcs {
		var stale, keyUsed bool
		if err := br.QueryRow().Scan(&g.created[i], &stale, &keyUsed, new(any)); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("create %d of %d: %w", i+1, n, interpretError(err, pc.p.ID))
		}
	}
	writes(false)
	for _, d := range g.counts {
		if err := br.QueryRow().Scan(new(any)); err != nil && firstErr == nil {
			firstErr = descendantError(err, d)
		}
	}
	if len(g.pas) > 0 {
		plans()
	}
	return firstErr
}

// results reports a committed group: the created instances and the
// written ones; the caller's tasks are filled in.
func (g *preparedGroup) results() ([]*workflow.Instance, []*workflow.Instance, error) {
	insts := make([]*workflow.Instance, len(g.pcs))
	for i, pc := range g.pcs {
		inst, err := pc.result(g.created[i], false)
		if err != nil {
			// Not reached: the statement raised FD409.
			return nil, nil, err
		}
		insts[i] = inst
	}
	for _, pa := range g.pas {
		pa.fill()
	}
	return insts, g.written, nil
}
