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

// claimWriteSQL is one store.ClaimWrite: the instance's versioned update (u)
// with its history row (h) when $6 (SetState), and the leases of its tasks
// (t), made only when u matched or there is no u. The tasks are locked by
// the claim's transaction already, so status = 'QUEUED' holds; it is checked
// all the same. A write whose instance moved on writes nothing and returns
// a NULL version.
//
// $1 the instance, $2 its expected version, $3 the cause, $4 the new state,
// $5 the store's clock, $6 SetState, $7–$12 the tasks' ids, attempts,
// leases, owners, lease ends and attempt deadlines, $13 the history row
// (historyEntry), $14 the actor of the history row.
// claimWriteOneSQL is the same for a write of one task (the common case),
// its $7–$12 scalars: its row is found by primary key alone.
//
// The Flow shapes are for a write whose tasks have a concurrency key: a
// write whose instance moved on raises FD409 (claimMovedPrefix) instead of
// being skipped, so that the claim's change to the keys' counts, made
// after its writes (claimLeasedSQL), is the one of all its writes.
var (
	claimWriteSQL, claimWriteOneSQL         = claimWriteStatement(false, false), claimWriteStatement(true, false)
	claimWriteFlowSQL, claimWriteOneFlowSQL = claimWriteStatement(false, true), claimWriteStatement(true, true)
)

// claimMovedPrefix starts the FD409 message of a claim write of tasks
// with a key whose instance moved on; the instance's id follows.
const claimMovedPrefix = "claim: the workflow moved on: "

func claimWriteStatement(oneTask, flow bool) string {
	tasks := `
	FROM unnest($7::text[], $8::integer[], $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[])
		AS x (id, attempt, lease, owner, lease_until, attempt_deadline)
	WHERE w.id = x.id AND w.instance_id = $1 AND ` + notIndexed("w.status") + ` = 'QUEUED'`
	set := `attempt = x.attempt, lease = x.lease, lease_owner = x.owner,
		lease_until = x.lease_until, attempt_deadline = x.attempt_deadline`
	if oneTask {
		tasks = `
	WHERE w.id = $7::text AND ` + notIndexed("w.instance_id") + ` = $1 AND ` + notIndexed("w.status") + ` = 'QUEUED'`
		set = `attempt = $8::integer, lease = $9::text, lease_owner = $10::text,
		lease_until = $11::timestamptz, attempt_deadline = $12::timestamptz`
	}
	moved := ""
	if flow {
		moved = `,
	CASE WHEN $6::boolean AND NOT EXISTS (SELECT 1 FROM u) THEN flowd_conflict('` + claimMovedPrefix + `' || $1::text) END`
	}
	return `WITH u AS (
	UPDATE workflow_instances SET state = $4::jsonb, version = version + 1, updated_at = $5
	WHERE $6::boolean AND id = $1 AND version = $2 AND ` + notIndexed("status") + ` = 'RUNNING'
	RETURNING id, version, status, state
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause, actor)
	SELECT id, version, status, $13::jsonb, $5, $3, $14::text FROM u
), t AS (
	UPDATE workflow_tasks w SET status = 'LEASED', ` + set + `, updated_at = $5` + tasks + `
		AND (NOT $6::boolean OR EXISTS (SELECT 1 FROM u))
	RETURNING 1
)
SELECT (SELECT version FROM u), (SELECT count(*) FROM t)` + moved
}

// ClaimTasks locks claimable tasks with their instances, lets decide choose
// the writes and makes them; see store.TaskQuerier. It is a transaction
// of its own in two round trips: BEGIN and the claim query go out
// together, then the writes and COMMIT.
func (q *querier) ClaimTasks(ctx context.Context, p store.ClaimParams, decide func([]store.Claimable) ([]*store.ClaimWrite, error)) error {
	if decide == nil {
		return fmt.Errorf("%w: nil decide function", store.ErrInvalidArgument)
	}
	n, args, err := claimArgs(p.Queues, p.Now, p.Limit)
	if err != nil {
		return err
	}
	if n == 0 {
		_, err := decide([]store.Claimable{})
		return err
	}
	if q.pool == nil {
		return errOwnTransaction("ClaimTasks")
	}
	return q.claimPipelined(ctx, claimWithInstancesSQL(n, p.Limit), args, p, decide)
}

// claimSavepoint is where a claim with flow control rolls back to when a
// flow guard misses (store.ErrFlowMiss): its writes are left out, and what
// its transaction wrote before them (a group's writes) stays.
const claimSavepoint = "flowd_claim"

// leftOut reports a claim left out by a flow guard's miss: none of its
// writes was made.
func leftOut(pws []*preparedClaimWrite) {
	for _, pw := range pws {
		pw.w.Written, pw.w.Instance = false, nil
	}
}

func (q *querier) claimPipelined(ctx context.Context, sql string, args []any, p store.ClaimParams, decide func([]store.Claimable) ([]*store.ClaimWrite, error)) error {
	return q.inPipelinedTx(ctx, func(conn *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		b.Queue(sql, args...)
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
		locked, flow, err := gateFlow(ctx, conn, locked, p)
		if err != nil {
			return err
		}
		pws, err := q.decideClaim(ctx, conn, locked, decide, store.ActorFrom(ctx))
		if err != nil {
			return err // the ROLLBACK of inPipelinedTx ends the transaction
		}
		if len(pws) == 0 {
			flow.report()
			return nil // the ROLLBACK of inPipelinedTx ends the transaction
		}
		return finishClaim(ctx, conn, pws, flow)
	})
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

// finishClaim sends a claim's writes with its flow statements (see
// claimFlow.statements) and COMMIT in one pipeline on conn, inside the
// transaction that locked the tasks, and reports the writes. A claim with
// flow statements makes them after a savepoint: when a flow guard misses,
// a second round trip rolls back to it and commits what came before (a
// group's writes), and the claim's writes are reported not made.
// Once decided, the claim is finished even if ctx ends meanwhile: a commit
// whose answer a cancellation lost would leave the tasks leased to nobody
// until their leases end. A ctx that ended before anything was sent ends it.
func finishClaim(ctx context.Context, conn *pgxpool.Conn, pws []*preparedClaimWrite, flow *claimFlow) (err error) {
	if err := ctx.Err(); err != nil {
		return err // nothing sent yet: the caller rolls back
	}
	flows := flow.statements(pws)
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
	for _, pw := range pws {
		b.Queue(pw.sql, pw.args...)
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
	for _, pw := range pws {
		if err == nil {
			err = pw.result(br.QueryRow())
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
		return leaveOut(wctx, conn, pws)
	}
	if err != nil {
		return err
	}
	for _, pw := range pws {
		pw.fill()
	}
	flow.report()
	return nil
}

// leaveOut ends a claim whose flow guard missed: it rolls back to the
// claim's savepoint, commits what came before and reports the writes not
// made.
func leaveOut(ctx context.Context, conn *pgxpool.Conn, pws []*preparedClaimWrite) error {
	// One simple-protocol query of two statements: one round trip, and
	// nothing to prepare in the failed transaction.
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+claimSavepoint+"; COMMIT"); err != nil {
		return interpretError(err, "")
	}
	leftOut(pws)
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

// preparedClaimWrite is a checked ClaimWrite with its statement's arguments.
type preparedClaimWrite struct {
	w       *store.ClaimWrite
	read    *workflow.Instance
	now     time.Time
	sql     string // claimWriteSQL or claimWriteOneSQL, or their Flow shapes
	args    []any
	flow    bool // tasks with a concurrency key: a Flow shape
	version int64
	written bool
}

// decideClaim calls decide and checks and prepares the writes it returns.
// actor is the actor of their history rows; db, the claim's connection,
// is where the rows the history policy needs are read.
func (q *querier) decideClaim(ctx context.Context, db dbtx, locked []store.Claimable, decide func([]store.Claimable) ([]*store.ClaimWrite, error), actor string) ([]*preparedClaimWrite, error) {
	writes, err := decide(locked)
	if err != nil {
		return nil, err
	}
	if err := store.CheckClaimWrites(locked, writes); err != nil {
		return nil, err
	}
	insts := make(map[string]*workflow.Instance, len(locked))
	for _, c := range locked {
		insts[c.Task.InstanceID] = c.Instance
	}
	now := q.timestamp()
	pws := make([]*preparedClaimWrite, len(writes))
	for i, w := range writes {
		inst := insts[w.Tasks[0].InstanceID]
		// Without SetState the state is not written, but a parameter that
		// PostgreSQL may cast while planning has to be valid JSON.
		state := []byte("{}")
		var history any // NULL: no version written
		if w.SetState {
			if err := checkText("cause", w.Cause); err != nil {
				return nil, err
			}
			var err error
			if state, err = marshalState(w.State); err != nil {
				return nil, err
			}
			// The instance as the claim read it is the state the write
			// is guarded by (ExpectedVersion).
			var prior *workflow.State
			if inst.Version == w.ExpectedVersion {
				prior = &inst.State
			}
			old, err := priorState(ctx, db, inst.ID, w.ExpectedVersion, prior, state)
			if err != nil {
				return nil, err
			}
			row, err := historyEntry(ctx, db, inst.ID, w.ExpectedVersion+1, old, state)
			if err != nil {
				return nil, err
			}
			history = string(row)
		}
		n := len(w.Tasks)
		ids, leases, owners := make([]string, n), make([]string, n), make([]string, n)
		attempts := make([]int32, n)
		until, deadlines := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		for j, t := range w.Tasks {
			if !storableText(t.Lease) || !storableText(t.LeaseOwner) {
				return nil, fmt.Errorf("%w: task %q: the lease and its owner must be UTF-8 text without NUL characters", store.ErrInvalidArgument, t.ID)
			}
			ids[j], leases[j], owners[j], attempts[j] = t.ID, t.Lease, t.LeaseOwner, int32(t.Attempt)
			until[j] = pgtype.Timestamptz{Time: store.Timestamp(t.LeaseUntil), Valid: true}
			if !t.AttemptDeadline.IsZero() {
				deadlines[j] = pgtype.Timestamptz{Time: store.Timestamp(t.AttemptDeadline), Valid: true}
			}
		}
		pw := &preparedClaimWrite{w: w, read: inst, now: now, sql: claimWriteSQL, args: []any{
			inst.ID, w.ExpectedVersion, w.Cause, string(state), now, w.SetState,
			ids, attempts, leases, owners, until, deadlines, history, actor,
		}}
		pw.flow = len(store.LeasedChanges(nil, w.Tasks)) > 0
		switch {
		case n == 1 && pw.flow:
			pw.sql = claimWriteOneFlowSQL
		case n == 1:
			pw.sql = claimWriteOneSQL
		case pw.flow:
			pw.sql = claimWriteFlowSQL
		}
		if n == 1 {
			copy(pw.args[6:12], []any{ids[0], attempts[0], leases[0], owners[0], until[0], deadlines[0]})
		}
		pws[i] = pw
	}
	return pws, nil
}

// result reads the write's row: whether it was made.
func (pw *preparedClaimWrite) result(row pgx.Row) error {
	var (
		version *int64
		leased  int
	)
	dest := []any{&version, &leased}
	if pw.flow {
		dest = append(dest, new(any))
	}
	if err := row.Scan(dest...); err != nil {
		return interpretError(err, pw.read.ID)
	}
	switch {
	case pw.w.SetState && version == nil && leased == 0:
		return nil // the instance moved on: skipped
	case leased != len(pw.w.Tasks):
		// Not reached: the claim holds the tasks' locks.
		return fmt.Errorf("postgres: claim of workflow %q leased %d of %d tasks", pw.read.ID, leased, len(pw.w.Tasks))
	}
	pw.written = true
	if version != nil {
		pw.version = *version
	}
	return nil
}

// fill reports the outcome to the ClaimWrite, once the transaction is
// committed.
func (pw *preparedClaimWrite) fill() {
	w := pw.w
	w.Written, w.Instance = pw.written, nil
	if !pw.written {
		return
	}
	for _, t := range w.Tasks {
		t.LeaseUntil = store.Timestamp(t.LeaseUntil)
		if !t.AttemptDeadline.IsZero() {
			t.AttemptDeadline = store.Timestamp(t.AttemptDeadline)
		}
		t.UpdatedAt = pw.now
	}
	if w.SetState {
		inst := *pw.read
		inst.State, inst.Version, inst.UpdatedAt = w.State, pw.version, pw.now
		w.Instance = &inst
	}
}
