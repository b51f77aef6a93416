package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// applySQL is Apply in one statement, so one implicit transaction: the
// guarded task updates (tu), the instance's versioned update (u) with its
// history rows (h, and h2 for the settled version; made by historyEntry),
// the new tasks (ins) and the notification (n).
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
// updated tasks' in the same order, $29–$31 and $42 their guards (the rows
// as read: status, attempt, lease and lease end), $32 the store's clock,
// $33 the instance, $34 its expected version, $35, $37 and $38 the first
// new version's status, deadline and cause, $39 and $41 the settled
// version's status (” for none) and cause, $36 the header of the state the
// last version stores and $40 the ids of the steps whose records it puts
// (the records (sp, su) and the steps dropped (sd) are applyRecordsParam's:
// store.StepRecords), $43 the number of updates, $44 whether to notify,
// $45 the number of new versions, $46 and $47 the history rows of the first
// and the settled version, $48 the instance's output (NULL: unchanged; set
// only with the COMPLETED status), $49 the new tasks' iterations and the
// rest of their tailParams, the actor of the history rows (applyActor) and
// the updated tasks' held flags (applyHeldParam). Every write passes every
// parameter, so that one statement text (and its generic plan) serves all
// of them.
var applySQL, applyStrictSQL = applyStatements[applyShape{}], applyStatements[applyShape{strict: true}]

// applyOneSQL and applyOneStrictSQL are applySQL and applyStrictSQL for a
// write that updates exactly one task, the common case (a completion): its
// row and guard are scalar parameters in the same positions ($15–$31, $42)
// instead of arrays, a lighter statement for PostgreSQL to plan and run on
// the engine's hot path.
var applyOneSQL, applyOneStrictSQL = applyStatements[applyShape{oneTask: true}], applyStatements[applyShape{oneTask: true, strict: true}]

// applyShape says which of applyStatement's shapes a write needs: the
// updated tasks as arrays or as one row (oneTask), the conflict check of
// Apply or, when strict, of ApplyGroup, whether the write keeps the
// instance's status (sameStatus), and whether it changes the counts of a
// concurrency key (slot: it moves the instance into or out of a status
// that holds a slot or waits for one; store.Write.SlotChange), and
// whether it changes the LEASED counts of step concurrency keys (leased:
// store.LeasedChanges).
type applyShape struct{ oneTask, strict, sameStatus, slot, leased, guardOnly bool }

// applyStatements are the shapes of applyStatement, built once (a write
// that keeps its status changes no slot).
var applyStatements = func() map[applyShape]string {
	m := map[applyShape]string{}
	for i := range 64 {
		sh := applyShape{oneTask: i&1 != 0, strict: i&2 != 0, sameStatus: i&4 != 0, slot: i&8 != 0, leased: i&16 != 0, guardOnly: i&32 != 0}
		if (!sh.sameStatus || !sh.slot) && (!sh.guardOnly || sh.oneTask && !sh.leased) {
			m[sh] = applyStatement(sh)
		}
	}
	return m
}()

// The parameters of a slot shape, after the actor: the status the write
// moves from (a guard: the change is decided on it) and the change's two
// counts.
var (
	applyFromParam    = 56 + tailParams
	applyHoldersParam = 57 + tailParams
	applyQueuedParam  = 58 + tailParams
)

// applyOutputParam holds the outputs the updated tasks store (an array,
// a scalar for applyOneSQL; NULL keeps the stored one: store.Task.Output).
var applyOutputParam = 55 + tailParams

// applyRecordsParam holds the records of the steps the write puts (their
// ids are $40), the next one whether each existed, the one after the
// steps whose records it drops, the last whether $40 are all the state's
// steps (store.StepRecords).
var applyRecordsParam = 51 + tailParams

// applyHeldParam holds the held flags of the updated tasks (an array, a
// scalar for applyOneSQL): a versioned write sets them (store.Task.Held);
// a TasksOnly write (applyTasksSQL) leaves them as stored.
var applyHeldParam = 50 + tailParams

// applyLeasedParam is the first of the leased shape's three parameters
// (leasedUpsert's keys, deltas and limits), after the slot shape's when
// there are both.
func applyLeasedParam(sh applyShape) int {
	if sh.slot {
		return applyQueuedParam + 1
	}
	return applyFromParam
}

// applyLeased is the leased shape's part after the instance's update:
// the changes applied to the keys' rows when the instance was written.
func applyLeased(sh applyShape) string {
	n := applyLeasedParam(sh)
	return `), ` + leasedUpsert(param(n), param(n+1), param(n+2), "WHERE EXISTS (SELECT 1 FROM u)")
}

// applyLeasedMiss is the leased shape's branch of the final CASE: a
// change that missed its guard raises, which rolls the write back whole.
func applyLeasedMiss(sh applyShape) string {
	keys := param(applyLeasedParam(sh))
	return `WHEN u.version IS NOT NULL AND ` + leasedShort(keys) + ` THEN ` + leasedMissed(keys) + `
	`
}

// applySlot is the slot shape's part after the instance's update: the
// change applied to the row of the instance's key (none without a key).
var applySlot = `), s AS (
	` + slotUpsert("u.definition", "u.concurrency_key", "FROM u WHERE u.concurrency_key IS NOT NULL",
	param(applyHoldersParam)+"::integer", param(applyQueuedParam)+"::integer", "(SELECT concurrency_limit FROM u)", false) + `
`

// applySlotMiss is the slot shape's first branch of the final CASE: a
// write that took a slot of a key whose slots were all held raises, which
// rolls it back whole.
var applySlotMiss = `WHEN ` + param(applyHoldersParam) + `::integer > 0 AND u.concurrency_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM s)
		THEN flowd_conflict(format('` + slotMissPrefix + `all %s slots of concurrency key %L of definition %s are held', u.concurrency_limit, u.concurrency_key, u.definition))
	`

// applyStatement builds a shape of applySQL.
//
// A write that keeps the instance's status (most completions) does not
// set the column. A write that changes the counts of a concurrency key
// (the slot shape) is also guarded on the status it moves from, on which
// its change was decided, and applies the change to the key's row (s).
//
// applyStrictSQL raises FD409 whenever the instance's write did not happen,
// whatever missed: in a pipeline of several writes (ApplyGroup), every miss
// has to roll all of them back, and PostgreSQL rolls back an implicit
// transaction only on an error. The message says what moved, in a form
// applyConflict reads back: the task whose guard missed, the instance's
// actual version, or that it does not exist.
func applyStatement(sh applyShape) string {
	sql := applyTasks
	miss := applyMissArray
	if sh.oneTask {
		sql, miss = applyOneTask, applyMissOne
	}
	if sh.guardOnly {
		sql = applyGuardTask
	}
	instance := applyInstance
	if sh.sameStatus {
		instance = strings.Replace(instance, applySetStatus, "", 1)
	}
	slotMiss := ""
	if sh.slot {
		instance = strings.Replace(instance, applyWhere, applyWhere+" AND status = "+param(applyFromParam), 1) + applySlot
		slotMiss = applySlotMiss
	}
	if sh.leased {
		instance += applyLeased(sh)
		slotMiss += applyLeasedMiss(sh)
	}
	sql += instance + miss + applySelect
	if sh.strict {
		return sql + `
	CASE ` + slotMiss + `WHEN u.version IS NULL THEN flowd_conflict(CASE
		WHEN NOT EXISTS (SELECT 1 FROM workflow_instances WHERE id = $33)
			THEN '` + applyNotFound + `'
		WHEN NOT EXISTS (SELECT 1 FROM workflow_instances WHERE id = $33 AND version = $34)
			THEN '` + applyVersionMiss + `' || (SELECT version FROM workflow_instances WHERE id = $33)
		WHEN EXISTS (SELECT 1 FROM miss)
			THEN '` + applyTaskMiss + `' || (SELECT id FROM miss)
		ELSE '` + applyChanged + `' END) END` + applyFrom
	}
	return sql + `
	CASE ` + slotMiss + `WHEN u.version IS NULL AND EXISTS (SELECT 1 FROM tu)
		THEN flowd_conflict(CASE WHEN EXISTS (SELECT 1 FROM miss)
			THEN '` + applyTaskMiss + `' || (SELECT id FROM miss)
			ELSE format('workflow %s is no longer at version %s', $33::text, $34::bigint) END) END` + applyFrom
}

// The parts of applyStatement. applyTasks is the guarded updates of
// tasks given as arrays, applyOneTask of one task given as scalars; both
// return the ids they updated (tu), and miss is an id that did not match.
var (
	applyTasks = `WITH x AS (
	SELECT * FROM unnest($15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::int4[], $21::int4[],
		$22::timestamptz[], $23::text[], $24::text[], $25::timestamptz[], $26::timestamptz[], $27::text[], $28::text[],
		$29::text[], $30::int4[], $31::text[], $42::timestamptz[], ` + param(applyHeldParam) + `::boolean[], ` + param(applyOutputParam) + `::text[])
		AS x (` + newTaskColumns + `, g_status, g_attempt, g_lease, g_lease_until, held, output)
), tu AS (
	UPDATE workflow_tasks t SET ` + setTaskFromX + `, held = x.held, output = coalesce(x.output::jsonb, t.output), updated_at = $32
	FROM x
	WHERE t.id = x.id AND t.instance_id = $33
		AND ` + taskGuardX + `
		AND EXISTS (SELECT 1 FROM workflow_instances WHERE id = $33 AND version = $34)
	RETURNING t.id
`
	applyOneTask = `WITH tu AS (
	UPDATE workflow_tasks t SET status = $19, attempt = $20, max_attempts = $21, run_at = $22,
		lease = $23, lease_owner = $24, lease_until = $25, attempt_deadline = $26,
		input = $27::jsonb, last_error = $28, held = ` + param(applyHeldParam) + `::boolean,
		output = coalesce(` + param(applyOutputParam) + `::jsonb, t.output), updated_at = $32
	WHERE t.id = $15 AND ` + notIndexed("t.instance_id") + ` = $33
		AND t.status = $29 AND t.attempt = $30 AND t.lease = $31 AND t.lease_until IS NOT DISTINCT FROM $42::timestamptz
		AND EXISTS (SELECT 1 FROM workflow_instances WHERE id = $33 AND version = $34)
	RETURNING t.id
`
	// applyGuardTask is applyOneTask for a guard-only write
	// (store.TaskWrite.GuardOnly): the row is locked while its guard holds
	// (FOR SHARE: no other writer moves it before the commit), not
	// rewritten. The row's other parameters are unused; types names them
	// for their types, as applyOneTask has them.
	applyGuardTask = `WITH types AS (
	SELECT $19::text, $20::int4, $21::int4, $22::timestamptz, $23::text, $24::text, $25::timestamptz, $26::timestamptz,
		$27::jsonb, $28::text, ` + param(applyHeldParam) + `::boolean, ` + param(applyOutputParam) + `::jsonb
), tu AS (
	SELECT t.id FROM workflow_tasks t
	WHERE t.id = $15 AND ` + notIndexed("t.instance_id") + ` = $33
		AND t.status = $29 AND t.attempt = $30 AND t.lease = $31 AND t.lease_until IS NOT DISTINCT FROM $42::timestamptz
		AND EXISTS (SELECT 1 FROM workflow_instances WHERE id = $33 AND version = $34)
	FOR SHARE OF t
`
	applyMissArray = `), miss AS (
	SELECT x.id FROM x WHERE x.id NOT IN (SELECT id FROM tu) LIMIT 1
)

`
	// The row's instance, step and queue ($16–$18) are not written (they
	// never change); they are named here so that every parameter has a type.
	applyMissOne = `), miss AS (
	SELECT $15::text AS id, $16::text AS instance_id, $17::text AS step_id, $18::text AS queue
	WHERE NOT EXISTS (SELECT 1 FROM tu)
)
`
	applySelect = `SELECT u.definition, u.input, u.version, u.created_at, u.definition_revision,
	u.parent_id, u.parent_step, u.parent_index, u.traceparent, u.priority, u.rerun_of,
	(SELECT version FROM workflow_instances WHERE id = $33), (SELECT id FROM miss),
	(SELECT count(*) FROM ins), (SELECT count(*) FROM n),`
)

// applyActor is the actor of the write's history rows: the parameter
// after the new tasks' tailParams, the last one.
var applyActor = "$" + strconv.Itoa(49+tailParams) + "::text"

// applySetStatus is the status's part of applyInstance's SET list.
const applySetStatus = `status = CASE WHEN $39 = '' THEN $35 ELSE $39 END,
		`

// applyWhere is the guard of the instance's update.
const applyWhere = `WHERE id = $33 AND version = $34 AND (SELECT count(*) FROM tu) = $43`

// applyInstance is the part of applyStatement after the task updates:
// the instance's versioned update (u), its history rows (h, h2), its
// steps' records inserted (sp), replaced (su) and dropped (sd), the new tasks (ins) and the
// notification (n).
var applyInstance = `), u AS (
	UPDATE workflow_instances SET ` + applySetStatus + `state = $36::jsonb,
		deadline = $37, version = version + $45, updated_at = $32, output = coalesce($48::json, output)
	` + applyWhere + `
	RETURNING definition, input, version, created_at, definition_revision, parent_id, parent_step, parent_index, traceparent, priority,
		rerun_of, concurrency_key, concurrency_limit
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause, actor)
	SELECT $33, $34 + 1, $35, $46::jsonb, $32, $38, ` + applyActor + ` FROM u
), h2 AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause, actor)
	SELECT $33, $34 + 2, $39, $47::jsonb, $32, $41, ` + applyActor + ` FROM u WHERE $39 <> ''
), sp AS (
	INSERT INTO workflow_steps (instance_id, step_id, record)
	SELECT $33, r.step_id, r.record FROM u, ` + applyRecords + ` WHERE NOT r.existing
	ON CONFLICT (instance_id, step_id) DO UPDATE SET record = excluded.record
), su AS (
	UPDATE workflow_steps s SET record = r.record FROM ` + applyRecords + `
	WHERE s.instance_id = $33 AND s.step_id = r.step_id AND r.existing AND EXISTS (SELECT 1 FROM u)
), sd AS (
	DELETE FROM workflow_steps WHERE instance_id = $33 AND EXISTS (SELECT 1 FROM u)
		AND (` + param(applyRecordsParam+3) + `::boolean OR cardinality(` + param(applyRecordsParam+2) + `::text[]) > 0)
		AND (step_id = ANY (` + param(applyRecordsParam+2) + `::text[]) OR (` + param(applyRecordsParam+3) + `::boolean AND step_id <> ALL ($40::text[])))
), ins AS (
	` + insertTasksPrefix + `$32, $32
	FROM ` + newTasks1(49) + `
	WHERE EXISTS (SELECT 1 FROM u)
	RETURNING 1
), n AS (
	SELECT pg_notify('` + notifyChannel + `', '') FROM u WHERE $44::boolean
`

// applyRecords are the step records a write puts, each with whether it
// existed: those that did are updated in place (su), the others inserted
// (sp; with All, a conflict replaces the stored record). An upsert of a
// record that exists would also lock its row first, one more WAL record.
var applyRecords = `unnest($40::text[], ` + param(applyRecordsParam) + `::jsonb[], ` + param(applyRecordsParam+1) + `::boolean[]) AS r (step_id, record, existing)`

const applyFrom = `
FROM (SELECT 1) one LEFT JOIN u ON true`

// The FD409 messages of a write rolled back by applySQL or applyStrictSQL,
// read back by applyConflict: applyTaskMiss is followed by the id of the
// task whose guard missed, applyVersionMiss by the instance's version.
const (
	applyTaskMiss    = "apply: task guard missed: "
	applyVersionMiss = "apply: workflow at version "
	applyNotFound    = "apply: workflow not found"
	applyChanged     = "apply: the instance changed during the write"
)

// applyConflict is the error of w whose statement raised FD409 with msg,
// typed as a miss of its own statement would be; ok is false for another
// message.
func applyConflict(w *store.Write, msg string) (err error, ok bool) {
	if id, ok := strings.CutPrefix(msg, applyTaskMiss); ok {
		return &store.TaskConflictError{InstanceID: w.ID, TaskID: id}, true
	}
	if v, ok := strings.CutPrefix(msg, applyVersionMiss); ok {
		if actual, err := strconv.ParseInt(v, 10, 64); err == nil {
			return w.VersionConflict(actual), true
		}
	}
	switch msg {
	case applyNotFound:
		return store.NotFound(w.ID), true
	case applyChanged:
		return changedDuringWrite(w), true
	}
	return nil, false
}

// changedDuringWrite is the conflict of w whose instance moved on between
// the statement's snapshot and its write.
func changedDuringWrite(w *store.Write) error {
	return &store.ConflictError{ID: w.ID, Expected: w.ExpectedVersion, Actual: -1,
		Reason: "the instance changed during the write"}
}

// Apply writes w in one statement (applySQL, or applyOneSQL); see
// store.Applier.
func (q *querier) Apply(ctx context.Context, w *store.Write) (_ *workflow.Instance, err error) {
	defer q.settle(&err) // a write of its own on the pool
	if w.TasksOnly {
		return nil, q.applyTasks(ctx, w)
	}
	pa, err := q.prepareApply(ctx, w, store.WriteActor(ctx, w.Actor))
	if err != nil {
		return nil, err
	}
	if len(w.Search) > 0 {
		// A write that sets search attributes (rare: a code workflow's
		// ctx.search) is two statements in one transaction.
		var inst *workflow.Instance
		err := q.atomically(ctx, func(tq *querier) error {
			var err error
			if inst, err = pa.send(ctx, tq.db); err != nil {
				return err
			}
			return putSearch(ctx, tq.db, w)
		})
		if err != nil {
			return nil, err
		}
		pa.fill()
		return inst, nil
	}
	inst, err := pa.send(ctx, q.db)
	if err != nil {
		return nil, err
	}
	pa.fill()
	return inst, nil
}

// send writes pa alone on db, under generic plans, and reads its row.
func (pa *preparedApply) send(ctx context.Context, db dbtx) (*workflow.Instance, error) {
	b := &pgx.Batch{}
	b.Queue(genericPlansSQL)
	b.Queue(pa.sql(false), pa.args...)
	b.Queue(defaultPlansSQL)
	br := db.SendBatch(ctx, b)
	var inst *workflow.Instance
	err := execSetting(br)
	if err == nil {
		if inst, err = pa.result(br.QueryRow()); err == nil {
			err = execSetting(br)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = interpretError(cerr, "")
	}
	return inst, err
}

// preparedApply is a checked Write with its statement's arguments.
type preparedApply struct {
	w     *store.Write
	state workflow.State // the state as stored by the last version
	// stateLen is the length of state's stored form.
	stateLen int
	inserts  []store.Task
	now      time.Time
	args     []any
	leased   bool // it changes LEASED counts: the leased shape
}

// prepareApply checks w and makes its statement's arguments; actor is the
// actor of its history rows.
func (q *querier) prepareApply(ctx context.Context, w *store.Write, actor string) (*preparedApply, error) {
	if err := w.Prepare(); err != nil {
		return nil, err
	}
	for _, s := range []struct{ what, v string }{{"id", w.ID}, {"cause", w.Cause}, {"settled cause", w.SettledCause}} {
		if err := checkText(s.what, s.v); err != nil {
			return nil, err
		}
	}
	state, err := store.PrepareState(w)
	if err != nil {
		return nil, err
	}
	final := state.State
	settled := state
	if w.Settled != "" && store.StopSteps(w.Status, w.Settled, &final) {
		if settled, err = store.EncodeState(final); err != nil {
			return nil, err
		}
	}
	rows, err := q.applyHistory(ctx, w, state, &final, settled)
	if err != nil {
		return nil, err
	}
	// The instance's row and its steps' records store the last version's
	// state, over the one the write moves from.
	changed := w.Changed
	if w.Settled != "" {
		// The settled version changes records of its own.
		changed = nil
	}
	records, err := store.SplitState(w.Prior, final, changed)
	if err != nil {
		return nil, err
	}
	header, ids, recordArgs := stepArgs(records)
	now := q.timestamp()
	inserts, insertCols, err := prepareTasks(w.Insert, now)
	if err != nil {
		return nil, err
	}
	gu, err := prepareTaskWrites(w.Update)
	if err != nil {
		return nil, err
	}
	versions := 1
	if w.Settled != "" {
		versions = 2
	}
	args := insertCols.args()
	var leaseUntil, held, output any = gu.leaseUntil, gu.held, gu.output
	if len(gu.rows) == 1 {
		// applyOneSQL: the row and its guard as scalars.
		r := &gu.rows[0]
		args = append(args, r.ID, r.InstanceID, r.StepID, r.Queue, string(r.Status), int32(r.Attempt), int32(r.MaxAttempts),
			r.RunAt, r.Lease, r.LeaseOwner, nullTime(r.LeaseUntil), nullTime(r.AttemptDeadline), string(r.Input), r.LastError,
			gu.status[0], gu.attempt[0], gu.lease[0])
		leaseUntil, held, output = gu.leaseUntil[0], gu.held[0], gu.output[0]
	} else {
		args = append(args, columnArrays(gu.rows).args()...)
		args = append(args, gu.status, gu.attempt, gu.lease)
	}
	args = append(args, now, w.ID, w.ExpectedVersion,
		string(w.Status), header, timestampPtr(w.Deadline), w.Cause,
		string(w.Settled), ids, w.SettledCause,
		leaseUntil, len(w.Update), w.Notify, versions, rows[0], rows[1],
		outputArg(w.Output))
	args = append(append(args, insertCols.tail()...), actor, held, recordArgs, records.Existing, nonNil(records.Drop), records.All, output)
	if slot := w.SlotChange(); !slot.None() {
		args = append(append(args, string(w.From)), slotArgs(slot)...)
	}
	leased := store.LeasedChanges(w.Update, nil)
	if len(leased) > 0 {
		args = append(args, leasedArgs(leased)...)
	}
	return &preparedApply{w: w, state: final, stateLen: settled.Len(), inserts: inserts, now: now, args: args, leased: len(leased) > 0}, nil
}

// guardedUpdates are the task writes of an Apply as statement arguments:
// the rows and, per row, its guard: the row as read (a NULL lease end for
// a row without one).
type guardedUpdates struct {
	rows          []store.Task
	status, lease []string
	attempt       []int32
	leaseUntil    []*time.Time
	held          []bool    // the rows' held flags, for a versioned write
	output        []*string // the rows' outputs (nil keeps the stored one)
}

// prepareTaskWrites checks the task writes of an Apply and returns them as
// statement arguments.
func prepareTaskWrites(ws []store.TaskWrite) (*guardedUpdates, error) {
	n := len(ws)
	gu := &guardedUpdates{rows: make([]store.Task, n), status: make([]string, n), lease: make([]string, n),
		attempt: make([]int32, n), leaseUntil: make([]*time.Time, n), held: make([]bool, n), output: make([]*string, n)}
	for i, u := range ws {
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
		gu.rows[i], gu.held[i] = r, r.Held
		if r.Output != nil {
			if err := checkJSON("task output", r.Output); err != nil {
				return nil, err
			}
			o := string(r.Output)
			gu.output[i] = &o
		}
		g := u.Guard
		gu.status[i], gu.attempt[i], gu.lease[i] = string(g.Status), int32(g.Attempt), g.Lease
		gu.leaseUntil[i] = nullTime(g.LeaseUntil)
	}
	return gu, nil
}

// sql is the statement that writes pa: applySQL's shape for its updates,
// strict (applyStrictSQL) in a group, without setting the status when the
// write keeps the one it was decided on (From; unknown when empty), with
// the slot change and the LEASED counts' when it makes them.
func (pa *preparedApply) sql(strict bool) string {
	w := pa.w
	same := w.From != "" && w.Status == w.From && w.Settled == ""
	slot := !w.SlotChange().None()
	one := len(w.Update) == 1
	return applyStatements[applyShape{oneTask: one, strict: strict, sameStatus: same && !slot, slot: slot, leased: pa.leased,
		guardOnly: one && w.Update[0].GuardOnly && !pa.leased}]
}

// result reads the row of applySQL or applyStrictSQL: the instance as
// written, or what moved. The caller's tasks are filled in by fill, once the
// write is committed (or part of the caller's transaction).
func (pa *preparedApply) result(row interface{ Scan(...any) error }) (*workflow.Instance, error) {
	w := pa.w
	var (
		definition, missing *string
		input               []byte
		version, actual     *int64
		created             *time.Time
		revision            *int
		inserted, notified  int
		parent              parentColumns
		traceParent         *string
		priority            *int16
		rerunOf             *string
	)
	err := row.Scan(&definition, &input, &version, &created, &revision, &parent.id, &parent.step, &parent.index, &traceParent, &priority, &rerunOf, &actual, &missing, &inserted, &notified, new(any))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeCommitConflict {
		if cerr, ok := applyConflict(w, pgErr.Message); ok {
			return nil, cerr
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
		return nil, changedDuringWrite(w)
	case inserted != len(pa.inserts):
		// Not reached: a unique violation failed the statement.
		return nil, fmt.Errorf("postgres: apply to workflow %q inserted %d of %d tasks", w.ID, inserted, len(pa.inserts))
	}
	inst := &workflow.Instance{
		ID: w.ID, Definition: *definition, DefinitionRevision: *revision, Status: w.FinalStatus(),
		State: pa.state, Input: compactJSON(input), Version: *version,
		CreatedAt: created.UTC(), UpdatedAt: pa.now, Deadline: utcPtr(timestampPtr(w.Deadline)),
		Output: w.Output,
		Parent: parent.ref(), Priority: int(*priority),
	}
	if traceParent != nil {
		inst.TraceParent = *traceParent
	}
	if rerunOf != nil {
		inst.RerunOf = *rerunOf
	}
	return inst, nil
}

// outputArg is a write's output as a statement argument: NULL (the stored
// output stays) when there is none.
func outputArg(out []byte) any {
	if out == nil {
		return nil
	}
	return string(out)
}

// fill gives the caller's tasks what was stored.
func (pa *preparedApply) fill() {
	pa.w.StateLen = pa.stateLen
	for i, t := range pa.w.Insert {
		*t = pa.inserts[i]
	}
	for _, u := range pa.w.Update {
		if !u.GuardOnly {
			normaliseTaskTimes(u.Task)
			u.Task.UpdatedAt = pa.now
		}
	}
}

// applyHistory returns the history rows of w's versions: the first one's,
// whose state is w.State, stored as state, and the settled version's (nil
// when w settles nothing), whose state is final, stored as settled, and
// whose previous row is the first one.
func (q *querier) applyHistory(ctx context.Context, w *store.Write, state *store.StoredState, final *workflow.State, settled *store.StoredState) ([2]any, error) {
	prior, err := priorState(ctx, q.db, w.ID, w.ExpectedVersion, w.Prior, state.Len())
	if err != nil {
		return [2]any{}, err
	}
	first, err := historyEntry(ctx, q.db, w.ID, w.ExpectedVersion+1, state.Len(), state.JSON, store.HistoryPatchOf(prior, &w.State, w.Changed))
	if err != nil || w.Settled == "" {
		return [2]any{string(first), nil}, err
	}
	row, err := jsondelta.Row(w.ExpectedVersion+2, settled.Len(), settled.JSON, store.HistoryPatchOf(&w.State, final, nil), func() ([]byte, error) { return first, nil })
	if err != nil {
		return [2]any{}, fmt.Errorf("postgres: workflow %q history version %d: %w", w.ID, w.ExpectedVersion+2, err)
	}
	return [2]any{string(first), string(row)}, nil
}

// A write's statement finds its rows by primary key, so the generic plan
// of the prepared statement is the right one for any arguments. Left to
// itself PostgreSQL often keeps making a custom plan for each call of the
// apply statements (their many optional parts fold away under custom
// plans and make them look cheaper), and planning them costs more than
// running them. genericPlansSQL goes before a pipeline's writes and
// defaultPlansSQL after them; both are part of the writes' transaction, so
// a rolled-back pipeline leaves the session's setting as it was too.
const (
	genericPlansSQL = "SET plan_cache_mode = force_generic_plan"
	defaultPlansSQL = "RESET plan_cache_mode"
)

// execSetting reads the result of genericPlansSQL or defaultPlansSQL.
func execSetting(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		return interpretError(err, "")
	}
	return nil
}
