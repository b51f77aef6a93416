package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// setTaskFromX is the SET list of a guarded task update, from the
// unnested rows x of Apply's and of a TasksOnly Apply's statement: every
// mutable column of the row but held, which only Apply's sets.
const setTaskFromX = `status = x.status, attempt = x.attempt, max_attempts = x.max_attempts, run_at = x.run_at,
		lease = x.lease, lease_owner = x.lease_owner, lease_until = x.lease_until, attempt_deadline = x.attempt_deadline,
		input = x.input::jsonb, last_error = x.last_error`

// taskGuardX is the guard of a task update from the unnested rows x: the
// stored row is still the row as read (status, attempt, lease and its end,
// compared NULL-safely: a row without a lease has no end). It decides
// nothing about the lease: the caller did, on the row it read.
const taskGuardX = `t.status = x.g_status AND t.attempt = x.g_attempt AND t.lease = x.g_lease
		AND t.lease_until IS NOT DISTINCT FROM x.g_lease_until`

// applyTasksSQL is a TasksOnly Apply in one statement: the guarded task
// updates (tu) and the notification (n); the instance is read (its status
// for the From guard), never written. When some rows of tu matched and
// others did not, flowd_conflict raises SQLSTATE FD409 and the statement is
// rolled back; when none matched, nothing was written and the last columns
// say why.
//
// The From guard ($21) is read twice: in tu, from the statement's snapshot,
// and, once the task rows are locked, again in locked under a share lock of
// the instance row, which waits for a writer of the instance and sees what
// it committed. The snapshot alone would let a tasks-only cancel that waited
// for a task row a retry was writing cancel the task the retry had just
// made runnable again. Locking the instance after its tasks keeps the lock
// order of every write.
//
// $1–$14 are the updated tasks' columns (as applySQL's $15–$28), $15–$18
// their guards (the rows as read: status, attempt, lease, lease end), $19
// the instance, $20 the store's clock, $21 the status the instance must
// have (” for any), $22 whether to notify, $23 the number of updates.
// applyTasksLeasedSQL also applies the write's changes to the LEASED
// counts of its keys ($24–$26, leasedUpsert's) when every row matched,
// and raises when one misses its guard.
var applyTasksSQL, applyTasksLeasedSQL = applyTasksStatement(false), applyTasksStatement(true)

func applyTasksStatement(leased bool) string {
	fc, miss := "", ""
	if leased {
		fc = `), ` + leasedUpsert("$24", "$25", "$26", "WHERE (SELECT count(*) FROM tu) = $23")
		miss = `
	WHEN (SELECT count(*) FROM tu) = $23 AND ` + leasedShort("$24") + ` THEN ` + leasedMissed("$24")
	}
	return `WITH x AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::int4[],
		$8::timestamptz[], $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[], $13::text[], $14::text[],
		$15::text[], $16::int4[], $17::text[], $18::timestamptz[])
		AS x (` + newTaskColumns + `, g_status, g_attempt, g_lease, g_lease_until)
), tu AS (
	UPDATE workflow_tasks t SET ` + setTaskFromX + `, updated_at = $20
	FROM x
	WHERE t.id = x.id AND t.instance_id = $19
		AND ` + taskGuardX + `
		AND ($21 = '' OR EXISTS (SELECT 1 FROM workflow_instances WHERE id = $19 AND status = $21))
	RETURNING t.id
), n AS (
	SELECT pg_notify('` + notifyChannel + `', '') WHERE $22::boolean AND (SELECT count(*) FROM tu) = $23
), miss AS (
	SELECT x.id FROM x WHERE x.id NOT IN (SELECT id FROM tu) LIMIT 1
), locked AS (
	SELECT status FROM workflow_instances WHERE id = $19 AND $21 <> '' AND EXISTS (SELECT 1 FROM tu) FOR SHARE
` + fc + `)
SELECT (SELECT count(*) FROM tu), (SELECT status FROM workflow_instances WHERE id = $19), (SELECT id FROM miss),
	(SELECT count(*) FROM n),
	CASE WHEN (SELECT count(*) FROM tu) BETWEEN 1 AND $23 - 1
		THEN flowd_conflict('` + applyTaskMiss + `' || (SELECT id FROM miss))
	WHEN EXISTS (SELECT 1 FROM locked WHERE status <> $21)
		THEN flowd_conflict('` + applyStatusMoved + `' || (SELECT status FROM locked))` + miss + ` END`
}

// applyStatusMoved starts the FD409 message of a TasksOnly Apply rolled
// back because its instance left the From status while the write waited
// for its task rows; the status follows.
const applyStatusMoved = "apply: the status of the instance is now "

// applyTasks writes a TasksOnly w in one statement (applyTasksSQL); see
// store.Write.TasksOnly.
func (q *querier) applyTasks(ctx context.Context, w *store.Write) error {
	if err := w.Prepare(); err != nil {
		return err
	}
	if !storableText(w.ID) {
		return store.NotFound(w.ID)
	}
	gu, err := prepareTaskWrites(w.Update)
	if err != nil {
		return err
	}
	now := q.timestamp()
	args := append(columnArrays(gu.rows).args(), gu.status, gu.attempt, gu.lease, gu.leaseUntil,
		w.ID, now, string(w.From), w.Notify, len(w.Update))
	sql := applyTasksSQL
	if leased := store.LeasedChanges(w.Update, nil); len(leased) > 0 {
		sql, args = applyTasksLeasedSQL, append(args, leasedArgs(leased)...)
	}
	var (
		written, notified int
		status, missing   *string
	)
	err = q.db.QueryRow(ctx, sql, args...).Scan(&written, &status, &missing, &notified, new(any))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeCommitConflict {
		if id, ok := strings.CutPrefix(pgErr.Message, applyTaskMiss); ok {
			return &store.TaskConflictError{InstanceID: w.ID, TaskID: id}
		}
		if st, ok := strings.CutPrefix(pgErr.Message, applyStatusMoved); ok {
			return w.StatusConflict(workflow.Status(st))
		}
	}
	switch {
	case err != nil:
		return interpretError(err, w.ID)
	case written == len(w.Update):
	case status == nil:
		return store.NotFound(w.ID)
	case w.From != "" && workflow.Status(*status) != w.From:
		return w.StatusConflict(workflow.Status(*status))
	case missing != nil:
		return &store.TaskConflictError{InstanceID: w.ID, TaskID: *missing}
	default:
		// Not reached: a partial write raised FD409.
		return fmt.Errorf("postgres: tasks-only apply to workflow %q wrote %d of %d tasks", w.ID, written, len(w.Update))
	}
	for i, u := range w.Update {
		*u.Task = gu.rows[i]
		u.Task.UpdatedAt = now
	}
	return nil
}
