package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// applySQL is Apply in one statement, so one implicit transaction: the
// guarded task updates (tu), the instance's versioned update (u) with its
// history rows (h, and h2 for the settled version, whose previous row is
// h's, not visible to the statement: it is handed over), the new tasks (ins)
// and the notification (n).
//
// tu runs only while the instance is at the expected version, and each row
// only while its guard holds; u runs only when every guarded row matched.
// tu locks the task rows before u locks the instance: the lock order task →
// instance that every write keeps. When some rows of tu matched and u did
// not (another row's guard missed, or the instance moved on between the
// statement's snapshot and u's lock), flowd_conflict raises SQLSTATE FD409
// and the statement, tu included, is rolled back; otherwise a miss wrote
// nothing and the last columns say what moved.
//
// $1–$14 are the new tasks' columns (as insertTasksSQL), $15–$28 the
// updated tasks' in the same order, $29–$31 their guards (lease, status,
// attempt; NULL: not guarded), $32 the store's clock, $33 the instance, $34
// its expected version, $35–$38 the first new version's status, state,
// deadline and cause, $39–$41 the settled version's status (” for none),
// state (NULL: the same) and cause, $42 the engine's now, $43 the number of
// updates, $44 whether to notify, $45 the number of new versions.
const applySQL = `WITH x AS (
	SELECT * FROM unnest($15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::int4[], $21::int4[],
		$22::timestamptz[], $23::text[], $24::text[], $25::timestamptz[], $26::timestamptz[], $27::text[], $28::text[],
		$29::text[], $30::text[], $31::int4[])
		AS x (` + newTaskColumns + `, g_lease, g_status, g_attempt)
), tu AS (
	UPDATE workflow_tasks t SET status = x.status, attempt = x.attempt, max_attempts = x.max_attempts, run_at = x.run_at,
		lease = x.lease, lease_owner = x.lease_owner, lease_until = x.lease_until, attempt_deadline = x.attempt_deadline,
		input = x.input::jsonb, last_error = x.last_error, updated_at = $32
	FROM x
	WHERE t.id = x.id AND t.instance_id = $33
		AND (x.g_lease IS NULL OR (t.status = 'LEASED' AND t.lease = x.g_lease AND t.lease_until > $42))
		AND (x.g_status IS NULL OR (t.status = x.g_status AND t.attempt = x.g_attempt))
		AND EXISTS (SELECT 1 FROM workflow_instances WHERE id = $33 AND version = $34)
	RETURNING t.id
), u AS (
	UPDATE workflow_instances SET status = CASE WHEN $39 = '' THEN $35 ELSE $39 END,
		state = CASE WHEN $39 = '' THEN $36::jsonb ELSE coalesce($40::jsonb, $36::jsonb) END,
		deadline = $37, version = version + $45, updated_at = $32
	WHERE id = $33 AND version = $34 AND (SELECT count(*) FROM tu) = $43
	RETURNING definition, input, version, created_at, definition_revision
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
	SELECT $33, $34 + 1, $35, flowd_history_entry($33, $34 + 1, (SELECT state FROM workflow_instances WHERE id = $33), $36::jsonb), $32, $38 FROM u
	RETURNING state
), h2 AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
	SELECT $33, $34 + 2, $39, flowd_history_entry($33, $34 + 2, $36::jsonb, coalesce($40::jsonb, $36::jsonb), (SELECT state FROM h)), $32, $41 FROM u WHERE $39 <> ''
), ins AS (
	` + insertTasksPrefix + `$32, $32
	FROM ` + newTasks1 + `
	WHERE EXISTS (SELECT 1 FROM u)
	RETURNING 1
), n AS (
	SELECT pg_notify('` + notifyChannel + `', '') FROM u WHERE $44::boolean
), miss AS (
	SELECT x.id FROM x WHERE x.id NOT IN (SELECT id FROM tu) LIMIT 1
)
SELECT u.definition, u.input, u.version, u.created_at, u.definition_revision,
	(SELECT version FROM workflow_instances WHERE id = $33), (SELECT id FROM miss),
	(SELECT count(*) FROM ins), (SELECT count(*) FROM n),
	CASE WHEN u.version IS NULL AND EXISTS (SELECT 1 FROM tu)
		THEN flowd_conflict(CASE WHEN EXISTS (SELECT 1 FROM miss)
			THEN '` + applyTaskMiss + `' || (SELECT id FROM miss)
			ELSE format('workflow %s is no longer at version %s', $33::text, $34::bigint) END) END
FROM (SELECT 1) one LEFT JOIN u ON true`

// applyTaskMiss starts the FD409 message of an Apply rolled back because a
// task's guard missed; the task id follows.
const applyTaskMiss = "apply: task guard missed: "

// Apply writes w in one statement (applySQL); see store.Applier.
func (q *querier) Apply(ctx context.Context, w *store.Write) (_ *workflow.Instance, err error) {
	defer q.settle(&err) // a write of its own on the pool
	pa, err := q.prepareApply(w)
	if err != nil {
		return nil, err
	}
	return pa.result(q.db.QueryRow(ctx, applySQL, pa.args...))
}

// preparedApply is a checked Write with its statement's arguments.
type preparedApply struct {
	w       *store.Write
	state   workflow.State // the state as stored by the last version
	inserts []store.Task
	now     time.Time
	args    []any
}

func (q *querier) prepareApply(w *store.Write) (*preparedApply, error) {
	if err := w.Prepare(); err != nil {
		return nil, err
	}
	for _, s := range []struct{ what, v string }{{"id", w.ID}, {"cause", w.Cause}, {"settled cause", w.SettledCause}} {
		if err := checkText(s.what, s.v); err != nil {
			return nil, err
		}
	}
	state, err := marshalState(w.State)
	if err != nil {
		return nil, err
	}
	final := w.State.Clone()
	var settledState any // NULL: the settled version has the first one's state
	if w.Settled != "" && store.StopSteps(w.Status, w.Settled, &final) {
		b, err := marshalState(final)
		if err != nil {
			return nil, err
		}
		settledState = b
	}
	now := q.timestamp()
	inserts, insertCols, err := prepareTasks(w.Insert, now)
	if err != nil {
		return nil, err
	}
	updates := make([]store.Task, len(w.Update))
	gLease, gStatus := make([]*string, len(w.Update)), make([]*string, len(w.Update))
	gAttempt := make([]int32, len(w.Update))
	for i, u := range w.Update {
		r := *u.Task
		if r.Input == nil {
			r.Input = []byte("null")
		}
		if err := checkTask(&r); err != nil {
			return nil, err
		}
		if err := checkText("lease guard", u.Guard.Lease); err != nil {
			return nil, err
		}
		normaliseTaskTimes(&r)
		updates[i] = r
		if u.Guard.Lease != "" {
			gLease[i] = &u.Guard.Lease
		}
		if u.Guard.Status != "" {
			s := string(u.Guard.Status)
			gStatus[i] = &s
		}
		gAttempt[i] = int32(u.Guard.Attempt)
	}
	versions := 1
	if w.Settled != "" {
		versions = 2
	}
	args := append(insertCols.args(), columnArrays(updates).args()...)
	args = append(args, gLease, gStatus, gAttempt, now, w.ID, w.ExpectedVersion,
		string(w.Status), state, timestampPtr(w.Deadline), w.Cause,
		string(w.Settled), settledState, w.SettledCause,
		store.Timestamp(w.Now), len(w.Update), w.Notify, versions)
	return &preparedApply{w: w, state: final, inserts: inserts, now: now, args: args}, nil
}

// result reads the statement's row: the instance as written, or what moved.
func (pa *preparedApply) result(row interface{ Scan(...any) error }) (*workflow.Instance, error) {
	w := pa.w
	var (
		definition, missing *string
		input               []byte
		version, actual     *int64
		created             *time.Time
		revision            *int
		inserted, notified  int
	)
	err := row.Scan(&definition, &input, &version, &created, &revision, &actual, &missing, &inserted, &notified, new(any))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeCommitConflict {
		if id, ok := strings.CutPrefix(pgErr.Message, applyTaskMiss); ok {
			return nil, &store.TaskConflictError{InstanceID: w.ID, TaskID: id}
		}
	}
	switch {
	case err != nil:
		return nil, interpretError(err, w.ID)
	case actual == nil:
		return nil, store.NotFound(w.ID)
	case version == nil && *actual != w.ExpectedVersion:
		return nil, w.VersionConflict(*actual)
	case version == nil && missing != nil:
		return nil, &store.TaskConflictError{InstanceID: w.ID, TaskID: *missing}
	case version == nil:
		// The instance moved on between the statement's snapshot and its
		// write.
		return nil, &store.ConflictError{ID: w.ID, Expected: w.ExpectedVersion, Actual: -1,
			Reason: "the instance changed during the write"}
	case inserted != len(pa.inserts):
		// Not reached: a unique violation failed the statement.
		return nil, fmt.Errorf("postgres: apply to workflow %q inserted %d of %d tasks", w.ID, inserted, len(pa.inserts))
	}
	for i, t := range w.Insert {
		*t = pa.inserts[i]
	}
	for _, u := range w.Update {
		normaliseTaskTimes(u.Task)
		u.Task.UpdatedAt = pa.now
	}
	return &workflow.Instance{
		ID: w.ID, Definition: *definition, DefinitionRevision: *revision, Status: w.FinalStatus(),
		State: pa.state, Input: compactJSON(input), Version: *version,
		CreatedAt: created.UTC(), UpdatedAt: pa.now, Deadline: utcPtr(timestampPtr(w.Deadline)),
	}, nil
}
