package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// claimLeaseSQL writes the lease of one task of a claim, as
// store.Task.Deliver made it: $1 the owner, $2 the store's clock, $3–$7
// the task's id, attempt, lease, lease end and attempt deadline. A claim
// sends one per task, in one pipeline: a statement of the task's id alone
// is planned on the primary key whatever the table's size when its
// connection planned it, where a join with the unnested leases was
// planned as a scan of every task on a new database, a generic plan the
// connection would keep. The task is locked by the claim's transaction,
// so status = 'QUEUED' holds; it is checked all the same (one row
// updated).
var claimLeaseSQL = `UPDATE workflow_tasks SET status = 'LEASED', attempt = $4::int4, lease = $5::text, lease_owner = $1::text,
	lease_until = $6::timestamptz, attempt_deadline = $7::timestamptz, updated_at = $2
	WHERE id = $3::text AND ` + notIndexed("status") + ` = 'QUEUED'`

// ClaimTasks leases claimable tasks; see store.TaskQuerier. It is a
// transaction of its own in two round trips: BEGIN and the claim query go
// out together, then the leases, the flow rows and COMMIT.
func (q *querier) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	var none store.HeldBack
	n, args, err := claimArgs(p)
	if err != nil {
		return nil, none, err
	}
	if n == 0 {
		return []store.Claimable{}, none, nil
	}
	if q.pool == nil {
		return nil, none, errOwnTransaction("ClaimTasks")
	}
	var (
		claimed []store.Claimable
		held    store.HeldBack
	)
	err = q.inPipelinedTx(ctx, func(conn *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		b.Queue(claimWithInstancesSQL(n, p.Limit), args...)
		br := conn.SendBatch(ctx, b)
		var locked []store.Claimable
		_, err := br.Exec()
		if err == nil {
			locked, err = readClaimables(br)
		} else {
			err = interpretError(err, "")
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			err = interpretError(cerr, "")
		}
		if err != nil {
			return err
		}
		var leftOut bool
		claimed, held, leftOut, err = leaseLocked(ctx, conn, locked, p, q.timestamp())
		if err == nil && leftOut {
			err = fmt.Errorf("claim: %w", store.ErrFlowMiss)
		}
		return err
	})
	if err != nil {
		return claimed, none, err
	}
	return claimed, held, nil
}

// inPipelinedTx runs fn on a connection of its own, on which fn opens a
// transaction with statements sent in pipelines. A connection left inside
// the transaction (fn failed or did not commit) is rolled back; should that
// fail, the pool closes a connection released in a transaction.
func (q *querier) inPipelinedTx(ctx context.Context, fn func(conn *pgxpool.Conn) error) error {
	conn, err := q.pool.Acquire(ctx)
	if err != nil {
		return interpretError(err, "")
	}
	defer conn.Release()
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()
	return fn(conn)
}

// leaseLocked ends a claim inside the transaction on conn that locked
// its tasks: it keeps the tasks their flow control lets go (gateFlow),
// leases them (store.Task.DeliverForClaim) and sends the leases, the flow
// statements and COMMIT (finishClaim). It returns the tasks leased and,
// the claim committed, what their keys held back; or with leftOut the
// claim left out by a flow guard's miss (nothing leased, nothing held back
// reported, what the transaction wrote before the claim committed); with
// an error wrapping store.ErrOutcomeUnknown, the tasks as they were to be
// leased.
func leaseLocked(ctx context.Context, conn *pgxpool.Conn, locked []store.Claimable, p store.ClaimParams, now time.Time) (claimed []store.Claimable, held store.HeldBack, leftOut bool, err error) {
	var none store.HeldBack
	kept, flow, err := gateFlow(ctx, conn, locked, p)
	if err != nil {
		return nil, none, false, err
	}
	for _, c := range kept {
		c.Task.DeliverForClaim(p, now)
	}
	leftOut, err = finishClaim(ctx, conn, kept, flow, p.Owner, now)
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		return kept, none, false, err
	case err != nil || leftOut:
		return nil, none, leftOut, err
	}
	return kept, flow.heldBack(), false, nil
}

// claimSavepoint is where a claim with flow control rolls back to when a
// flow guard misses (store.ErrFlowMiss): its leases are left out, and what
// its transaction wrote before them (a group's writes) stays.
const claimSavepoint = "flowd_claim"

// finishClaim sends a claim's leases with its flow statements (see
// claimFlow.statements) and COMMIT in one pipeline on conn, inside the
// transaction that locked the tasks. A claim with flow statements makes
// them after a savepoint: when a flow guard misses, a second round trip
// rolls back to it and commits what came before (a group's writes), and
// leftOut reports the claim left out. Once the leases are decided, the
// claim is finished even if ctx ends meanwhile: a commit whose answer a
// cancellation lost would leave the tasks leased to nobody until their
// leases end. A ctx that ended before anything was sent ends it.
func finishClaim(ctx context.Context, conn *pgxpool.Conn, leases []store.Claimable, flow *claimFlow, owner string, now time.Time) (leftOut bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err // nothing sent yet: the caller rolls back
	}
	flows := flow.statements(leases)
	guarded := len(flows) > 0
	// The pipeline holds the COMMIT: a connection lost while reading any of
	// its answers may have lost only the answers.
	defer func() { err = commitOutcome(err) }()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	b := &pgx.Batch{}
	if guarded {
		b.Queue("SAVEPOINT " + claimSavepoint)
	}
	for _, c := range leases {
		b.Queue(claimLeaseSQL, leaseArgs(owner, now, c.Task)...)
	}
	for _, f := range flows {
		b.Queue(f.SQL, f.Arguments...)
	}
	b.Queue("COMMIT")
	br := conn.SendBatch(wctx, b)
	exec := func() {
		if _, eerr := br.Exec(); eerr != nil {
			err = interpretError(eerr, "")
		}
	}
	if guarded {
		exec()
	}
	for _, c := range leases {
		if err != nil {
			break
		}
		if tag, lerr := br.Exec(); lerr != nil {
			err = interpretError(lerr, "")
		} else if tag.RowsAffected() != 1 {
			// Not reached: the claim holds the tasks' locks.
			err = fmt.Errorf("postgres: a claim could not lease task %q it locked", c.Task.ID)
		}
	}
	for range flows {
		if err == nil {
			exec()
		}
	}
	if err == nil {
		// After an error the server skips the rest of the batch, COMMIT
		// included; the caller's ROLLBACK ends the failed transaction.
		exec()
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = interpretError(cerr, "")
	}
	if guarded && errors.Is(err, store.ErrFlowMiss) {
		return true, leaveOut(wctx, conn)
	}
	return false, err
}

// leaseArgs are the parameters of claimLeaseSQL for the lease of t.
func leaseArgs(owner string, now time.Time, t *store.Task) []any {
	var deadline pgtype.Timestamptz
	if !t.AttemptDeadline.IsZero() {
		deadline = pgtype.Timestamptz{Time: t.AttemptDeadline, Valid: true}
	}
	return []any{owner, now, t.ID, int32(t.Attempt), t.Lease, t.LeaseUntil, deadline}
}

// leaveOut ends a claim whose flow guard missed: it rolls back to the
// claim's savepoint and commits what came before.
func leaveOut(ctx context.Context, conn *pgxpool.Conn) error {
	// One simple-protocol query of two statements: one round trip, and
	// nothing to prepare in the failed transaction.
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+claimSavepoint+"; COMMIT"); err != nil {
		return interpretError(err, "")
	}
	return nil
}

// readClaimables reads the claim query's result from a pipeline.
func readClaimables(br pgx.BatchResults) ([]store.Claimable, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, interpretError(err, "")
	}
	return scanClaimables(rows)
}

// scanClaimables reads the rows of claimWithInstancesSQL; tasks of one
// instance share its decoded Instance.
func scanClaimables(rows pgx.Rows) ([]store.Claimable, error) {
	defer rows.Close()
	out := []store.Claimable{}
	insts := map[string]*workflow.Instance{}
	for rows.Next() {
		var ir instanceRow
		t, err := scanTask(extraColumns{rows, ir.dest()})
		if err != nil {
			return nil, interpretError(err, "")
		}
		inst := insts[t.InstanceID]
		if inst == nil {
			if inst, err = ir.instance(); err != nil {
				return nil, err
			}
			insts[t.InstanceID] = inst
		}
		out = append(out, store.Claimable{Task: t, Instance: inst})
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return out, nil
}

// extraColumns scans a row into the destinations it is given followed by
// extra: scanTask reads a task's columns and the instance's come after.
type extraColumns struct {
	row   pgx.Row
	extra []any
}

func (e extraColumns) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }
