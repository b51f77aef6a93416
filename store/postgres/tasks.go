package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The engine's operations (store.EngineQuerier). They run on the pool or,
// composed by the engine, inside WithTx. Locks are taken in one order
// everywhere: a task row first, then its instance; every query that would
// lock against that order uses SKIP LOCKED, and the claim query never locks
// the instance at all.

var (
	_ store.EngineQuerier = (*querier)(nil)
	_ store.EngineQuerier = (*Store)(nil)
)

// newTasks1 is the row source of new tasks: the arrays of prepareTasks
// (taskColumnArrays.args) as parameters $1–$14, unnested into rows x.
// newTasks11 is the same from $11 on.
const (
	newTasks1 = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::int4[],
		$8::timestamptz[], $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[], $13::text[], $14::text[])
		AS x (` + newTaskColumns + `)`
	newTasks11 = `unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::int4[], $17::int4[],
		$18::timestamptz[], $19::text[], $20::text[], $21::timestamptz[], $22::timestamptz[], $23::text[], $24::text[])
		AS x (` + newTaskColumns + `)`
	newTaskColumns = `id, instance_id, step_id, queue, status, attempt, max_attempts,
			run_at, lease, lease_owner, lease_until, attempt_deadline, input, last_error`
	// insertTasksPrefix inserts rows of x; created_at and updated_at follow.
	insertTasksPrefix = `INSERT INTO workflow_tasks (` + newTaskColumns + `, created_at, updated_at)
	SELECT id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
		lease, lease_owner, lease_until, attempt_deadline, input::jsonb, last_error, `
)

// taskColumns is the column list scanTask reads, in its order.
const taskColumns = `id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
	lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at`

const (
	// insertTasksSQL inserts the whole slice in one statement: one array
	// parameter per column, unnested into rows. It never fails on an
	// existing task (ON CONFLICT DO NOTHING, so a transaction is not
	// aborted) and inserts nothing when a task id or (instance, step) is
	// taken or an instance is missing; the result says which. Only a task
	// inserted concurrently and committed after this statement's snapshot
	// gets past the pre-check: then ON CONFLICT skips that one row, the
	// count falls short, and the caller must roll back (the pool path does).
	//
	// The pre-checks must probe the indexes, one lookup per new task,
	// whatever the statistics say. Written as plain EXISTS, PostgreSQL may
	// turn them into semi-joins or "hashed SubPlans" that read the whole
	// task table on every insert, and it does when it plans while the table
	// is empty and never analysed; pgx caches the statement, so a fresh
	// database kept that plan as the table grew (68 % of the server's time
	// in the workflow benchmark, docs/BENCHMARKS.md). OFFSET 0 keeps each
	// EXISTS a correlated subquery, which can only be an index probe per
	// row; TestInsertTasksProbesIndexes checks the plans.
	insertTasksSQL = `WITH x AS (
	SELECT * FROM ` + newTasks1 + `
), missing AS (
	SELECT x.instance_id FROM x
	WHERE NOT EXISTS (SELECT 1 FROM workflow_instances i WHERE i.id = x.instance_id OFFSET 0)
	LIMIT 1
), taken AS (
	SELECT x.instance_id, x.step_id FROM x
	WHERE EXISTS (SELECT 1 FROM workflow_tasks t WHERE t.id = x.id OFFSET 0)
		OR EXISTS (SELECT 1 FROM workflow_tasks t WHERE t.instance_id = x.instance_id AND t.step_id = x.step_id OFFSET 0)
	LIMIT 1
), ins AS (
	` + insertTasksPrefix + `$15, $15
	FROM x
	WHERE NOT EXISTS (SELECT 1 FROM missing) AND NOT EXISTS (SELECT 1 FROM taken)
	ON CONFLICT DO NOTHING
	RETURNING 1
)
SELECT (SELECT instance_id FROM missing), (SELECT instance_id FROM taken), (SELECT step_id FROM taken),
	(SELECT count(*) FROM ins)`

	getTaskSQL  = `SELECT ` + taskColumns + ` FROM workflow_tasks WHERE id = $1`
	lockTaskSQL = getTaskSQL + ` FOR UPDATE`

	updateTaskSQL = `UPDATE workflow_tasks SET status = $2, attempt = $3, max_attempts = $4, run_at = $5,
	lease = $6, lease_owner = $7, lease_until = $8, attempt_deadline = $9, input = $10::jsonb,
	last_error = $11, updated_at = $12
WHERE id = $1`

	// Step ids are ordered bytewise (COLLATE "C"), as SQLite and Go do,
	// whatever the database's default collation.
	tasksOfInstanceSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks WHERE instance_id = $1 ORDER BY step_id COLLATE "C"`

	// expiredSQL is served by the partial expiry index.
	expiredSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks
WHERE status = 'LEASED' AND lease_until < $1
ORDER BY lease_until, id COLLATE "C"
LIMIT $2
FOR UPDATE SKIP LOCKED`

	// cancelOrphansSQL picks the tasks in a materialized CTE (the LIMIT
	// applies once, SKIP LOCKED leaves tasks that a claim or a completion
	// holds to the next sweep) and updates them through the primary key.
	// The status test is an OR, not IN, so that the planner can combine
	// the two partial indexes (claim and expiry) in a BitmapOr instead of
	// scanning every finished task.
	cancelOrphansSQL = `WITH picked AS MATERIALIZED (
	SELECT t.id FROM workflow_tasks t JOIN workflow_instances i ON i.id = t.instance_id
	WHERE (t.status = 'QUEUED' OR t.status = 'LEASED') AND i.status NOT IN ('RUNNING', 'PAUSED')
	LIMIT $1
	FOR UPDATE OF t SKIP LOCKED
)
UPDATE workflow_tasks SET status = 'CANCELLED', lease = '', updated_at = $2
WHERE id = ANY (ARRAY(SELECT id FROM picked))`

	// timeOutSQL is batchSQL with the deadline filter (served by the
	// partial deadline index: deadline < $1 implies deadline IS NOT NULL).
	timeOutSQL = `WITH picked AS MATERIALIZED (
	SELECT id, deadline, state FROM workflow_instances
	WHERE status IN ('RUNNING', 'PAUSED') AND deadline < $1
	ORDER BY deadline, id COLLATE "C"
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), u AS (
	UPDATE workflow_instances SET status = 'TIMED_OUT', state = ` + stoppedState + `'TIMED_OUT'` + stoppedStateEnd + `, version = version + 1, updated_at = $3
	WHERE id = ANY (ARRAY(SELECT id FROM picked))
	RETURNING id, version, status, state
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
	SELECT id, version, status, flowd_history_entry(id, version, picked.state, u.state), $3, $4 FROM u JOIN picked USING (id)
)
SELECT u.id FROM u JOIN picked USING (id) ORDER BY picked.deadline, picked.id COLLATE "C"`

	// notifySQL wakes the listeners of every node; inside a transaction
	// PostgreSQL delivers it at commit (and not at all on rollback).
	notifySQL = `SELECT pg_notify('` + notifyChannel + `', '')`

	// timeoutCause is the history cause of TimeOutInstances.
	timeoutCause = "workflow timeout"
)

// taskPrefixedColumns is taskColumns qualified with the alias t.
const taskPrefixedColumns = `t.id, t.instance_id, t.step_id, t.queue, t.status, t.attempt, t.max_attempts, t.run_at,
	t.lease, t.lease_owner, t.lease_until, t.attempt_deadline, t.input, t.last_error, t.created_at, t.updated_at`

// claimSQL returns the claim query for n queues ($2 … $n+1) due by $1, at
// most limit tasks: the engine's hot path. It must cost the same whatever
// the backlog: one ordered index scan per queue, stopped after limit rows,
// not a sort of every due task. A single scan with queue = ANY (…) cannot
// return rows in run_at order across several queues (PostgreSQL would read
// and sort all the due tasks of every queue asked for: about a second per
// claim with 200,000 queued tasks), so the LATERAL subquery walks the
// partial claim index (status = 'QUEUED' matches its predicate, queue and
// run_at are its columns) once per queue, in run_at order, each instance
// found through its primary key; the outer query merges the queues and
// keeps the oldest limit tasks.
//
// FOR UPDATE OF t locks task rows only, not the instance (the lock order
// is task → instance, and a claim must not wait for an instance being
// modified; a group's claim, claimLockingInstancesSQL, locks the instances
// with SKIP LOCKED too); SKIP LOCKED makes concurrent claimers take different tasks,
// and PostgreSQL applies the inner LIMIT to the rows it locked, so a
// claimer is never starved by rows others hold. The price: with several
// queues up to limit tasks per queue are locked, and those that the outer
// LIMIT drops stay locked (unclaimed) until the caller's transaction ends.
// The queues must be distinct (LockClaimable sees to it): the
// transaction's own locks do not make it skip a row.
//
// The queues are a VALUES list and the limit a literal, not an array and a
// parameter, so that the statement's generic plan knows as much as a custom
// one: with unnest($1) the planner guessed 10 queues and a tenth of the
// rows, priced the generic plan at five times the custom one and planned
// the statement anew on every claim (0.7 ms each, docs/BENCHMARKS.md).
// Callers use a few shapes (one limit, one queue list per worker), so pgx's
// statement cache holds them all; TestHotPathKeepsGenericPlans checks that
// PostgreSQL reuses the plan.
func claimSQL(queues, limit int) string { return claimQuery(queues, limit, "", "") }

// claimWithInstancesSQL is claimSQL that also returns each task's instance
// (the columns of instanceColumns, read, not locked), for ClaimTasks.
func claimWithInstancesSQL(queues, limit int) string {
	return claimQuery(queues, limit, claimInstanceColumns, "")
}

// claimLockingInstancesSQL is claimWithInstancesSQL that also locks the
// instances, skipping tasks whose instance another transaction holds: a
// store.GroupClaim's query.
func claimLockingInstancesSQL(queues, limit int) string {
	return claimQuery(queues, limit, claimInstanceColumns, " FOR NO KEY UPDATE OF i SKIP LOCKED")
}

const claimInstanceColumns = `,
		i.id AS i_id, i.definition AS i_definition, i.status AS i_status, i.state AS i_state, i.input AS i_input,
		i.version AS i_version, i.created_at AS i_created_at, i.updated_at AS i_updated_at,
		i.definition_revision AS i_definition_revision, i.deadline AS i_deadline`

func claimQuery(queues, limit int, extra, lockInstances string) string {
	var values strings.Builder
	for i := range queues {
		if i > 0 {
			values.WriteString(", ")
		}
		fmt.Fprintf(&values, "($%d::text)", i+2)
	}
	return fmt.Sprintf(`SELECT c.* FROM (VALUES %[1]s) AS q (queue)
CROSS JOIN LATERAL (
	SELECT `+taskPrefixedColumns+extra+`
	FROM workflow_tasks t JOIN workflow_instances i ON i.id = t.instance_id
	WHERE t.status = 'QUEUED' AND t.queue = q.queue AND t.run_at <= $1
		AND (i.status = 'RUNNING' OR (t.queue = '`+store.QueueSleep+`' AND i.status = 'PAUSED'))
	ORDER BY t.run_at, t.id COLLATE "C"
	LIMIT %[2]d
	FOR UPDATE OF t SKIP LOCKED`+lockInstances+`
) c
ORDER BY c.run_at, c.id COLLATE "C"
LIMIT %[2]d`, values.String(), limit)
}

// InsertTasks inserts tasks with one statement; see store.EngineQuerier.
// It fills in each task's ID (when empty), Status (QUEUED when empty),
// CreatedAt and UpdatedAt, normalises its times and sets a nil Input to JSON
// null. Errors: ErrExists for an id or (instance, step) that already has a
// task (also for duplicates within tasks), ErrNotFound for an unknown
// instance, ErrInvalidArgument for a task the schema would refuse. Nothing is
// inserted on error; inside a transaction, see insertTasksSQL for the one
// exception, after which the caller must roll back.
func (q *querier) InsertTasks(ctx context.Context, tasks []*store.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	now := q.timestamp()
	rows, cols, err := prepareTasks(tasks, now)
	if err != nil {
		return err
	}
	n := len(rows)
	err = q.atomically(ctx, func(tq *querier) error {
		var (
			missing, takenInstance, takenStep *string
			inserted                          int
		)
		err := tq.db.QueryRow(ctx, insertTasksSQL, append(cols.args(), now)...).
			Scan(&missing, &takenInstance, &takenStep, &inserted)
		switch {
		case err != nil:
			return interpretError(err, "")
		case missing != nil:
			return fmt.Errorf("task for an unknown instance: %w", store.NotFound(*missing))
		case takenInstance != nil:
			return fmt.Errorf("task for workflow %q step %q: %w", *takenInstance, *takenStep, store.ErrExists)
		case inserted != n:
			// Inserted concurrently: the pool path rolls back here.
			return fmt.Errorf("%d of %d tasks: %w", n-inserted, n, store.ErrExists)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, t := range tasks {
		*t = rows[i]
	}
	return nil
}

// prepareTasks checks new tasks and completes copies of them as they will be
// stored (ID, status, input, times), and returns those and the columns of
// the unnest parameters ($1–$14 of insertTasksSQL).
func prepareTasks(tasks []*store.Task, now time.Time) ([]store.Task, *taskColumnArrays, error) {
	n := len(tasks)
	// Everything is checked, on copies, before anything is sent; the
	// caller's tasks are completed only once they are stored.
	rows := make([]store.Task, n)
	seenID := make(map[string]bool, n)
	seenStep := make(map[[2]string]bool, n)
	for i, t := range tasks {
		if t == nil {
			return nil, nil, fmt.Errorf("%w: nil task", store.ErrInvalidArgument)
		}
		r := *t
		if r.ID == "" {
			r.ID = store.NewID()
		}
		if r.Status == "" {
			r.Status = store.TaskQueued
		}
		if r.Input == nil {
			r.Input = json.RawMessage("null")
		}
		if err := checkTask(&r); err != nil {
			return nil, nil, err
		}
		if seenID[r.ID] {
			return nil, nil, fmt.Errorf("task %q: %w", r.ID, store.ErrExists)
		}
		step := [2]string{r.InstanceID, r.StepID}
		if seenStep[step] {
			return nil, nil, fmt.Errorf("task for workflow %q step %q: %w", r.InstanceID, r.StepID, store.ErrExists)
		}
		seenID[r.ID], seenStep[step] = true, true
		normaliseTaskTimes(&r)
		r.CreatedAt, r.UpdatedAt = now, now
		rows[i] = r
	}
	return rows, columnArrays(rows), nil
}

// columnArrays returns rows as one array per column, for unnest.
func columnArrays(rows []store.Task) *taskColumnArrays {
	n := len(rows)
	c := &taskColumnArrays{
		ids: make([]string, n), instances: make([]string, n), steps: make([]string, n), queues: make([]string, n),
		statuses: make([]string, n), attempts: make([]int32, n), maxAttempts: make([]int32, n), runAt: make([]time.Time, n),
		leases: make([]string, n), owners: make([]string, n), leaseUntil: make([]*time.Time, n),
		attemptDeadline: make([]*time.Time, n), inputs: make([]string, n), lastErrors: make([]string, n),
	}
	for i, r := range rows {
		c.ids[i], c.instances[i], c.steps[i], c.queues[i], c.statuses[i] = r.ID, r.InstanceID, r.StepID, r.Queue, string(r.Status)
		c.attempts[i], c.maxAttempts[i] = int32(r.Attempt), int32(r.MaxAttempts)
		c.runAt[i] = r.RunAt
		c.leases[i], c.owners[i], c.inputs[i], c.lastErrors[i] = r.Lease, r.LeaseOwner, string(r.Input), r.LastError
		c.leaseUntil[i], c.attemptDeadline[i] = nullTime(r.LeaseUntil), nullTime(r.AttemptDeadline)
	}
	return c
}

// taskColumnArrays are new tasks as one array per column, for unnest.
type taskColumnArrays struct {
	ids, instances, steps, queues, statuses []string
	attempts, maxAttempts                   []int32
	runAt                                   []time.Time
	leases, owners                          []string
	leaseUntil, attemptDeadline             []*time.Time
	inputs, lastErrors                      []string
}

// args returns the arrays in the order of the unnest column list.
func (c *taskColumnArrays) args() []any {
	return []any{c.ids, c.instances, c.steps, c.queues, c.statuses, c.attempts, c.maxAttempts,
		c.runAt, c.leases, c.owners, c.leaseUntil, c.attemptDeadline, c.inputs, c.lastErrors}
}

// checkTask checks what the schema would refuse, so that a bad task returns
// ErrInvalidArgument instead of aborting the caller's transaction.
func checkTask(t *store.Task) error {
	switch t.Status {
	case store.TaskQueued, store.TaskLeased, store.TaskDone, store.TaskFailed, store.TaskCancelled:
	default:
		return fmt.Errorf("%w: task %q: unknown status %q", store.ErrInvalidArgument, t.ID, t.Status)
	}
	if t.Attempt < 0 || t.Attempt > math.MaxInt32 {
		return fmt.Errorf("%w: task %q: attempt %d is out of range", store.ErrInvalidArgument, t.ID, t.Attempt)
	}
	if t.MaxAttempts < 1 || t.MaxAttempts > math.MaxInt32 {
		return fmt.Errorf("%w: task %q: max attempts %d is out of range", store.ErrInvalidArgument, t.ID, t.MaxAttempts)
	}
	for _, f := range []struct{ what, s string }{
		{"id", t.ID}, {"instance id", t.InstanceID}, {"step id", t.StepID}, {"queue", t.Queue},
		{"lease", t.Lease}, {"lease owner", t.LeaseOwner}, {"last error", t.LastError},
	} {
		if err := checkText("task "+f.what, f.s); err != nil {
			return err
		}
	}
	if t.Input != nil && !json.Valid(t.Input) {
		return fmt.Errorf("%w: task %q: input is not valid JSON", store.ErrInvalidArgument, t.ID)
	}
	return checkJSON("task input", t.Input)
}

// normaliseTaskTimes gives t's times the form they are stored in, so that t
// equals what a later read returns.
func normaliseTaskTimes(t *store.Task) {
	t.RunAt = store.Timestamp(t.RunAt)
	t.LeaseUntil = zeroOrTimestamp(t.LeaseUntil)
	t.AttemptDeadline = zeroOrTimestamp(t.AttemptDeadline)
}

func zeroOrTimestamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return store.Timestamp(t)
}

// nullTime is the parameter for an optional time: NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// interpretTaskError is interpretError for statements on tasks: "not
// found" names the task.
func interpretTaskError(err error, id string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return taskNotFound(id)
	}
	return interpretError(err, "")
}

func taskNotFound(id string) error { return fmt.Errorf("task %q: %w", id, store.ErrNotFound) }

// LockTask returns the task, locked FOR UPDATE inside a transaction (a plain
// read on the pool, where a lock would end with the statement).
// ErrNotFound for an unknown id.
func (q *querier) LockTask(ctx context.Context, id string) (*store.Task, error) {
	if !storableText(id) {
		return nil, taskNotFound(id)
	}
	sql := lockTaskSQL
	if q.pool != nil {
		sql = getTaskSQL
	}
	t, err := scanTask(q.db.QueryRow(ctx, sql, id))
	if err != nil {
		return nil, interpretTaskError(err, id)
	}
	return t, nil
}

// UpdateTask writes every mutable field of t and sets t.UpdatedAt (and
// normalises t's times). ErrNotFound for an unknown id; ErrInvalidArgument
// for values the schema would refuse.
func (q *querier) UpdateTask(ctx context.Context, t *store.Task) (err error) {
	defer q.settle(&err) // a write of its own on the pool
	if t == nil {
		return fmt.Errorf("%w: nil task", store.ErrInvalidArgument)
	}
	if !storableText(t.ID) {
		return taskNotFound(t.ID)
	}
	input := t.Input
	if input == nil {
		input = json.RawMessage("null")
	}
	check := *t
	check.Input = input
	if err := checkTask(&check); err != nil {
		return err
	}
	now := q.timestamp()
	normaliseTaskTimes(&check)
	tag, err := q.db.Exec(ctx, updateTaskSQL, t.ID, string(t.Status), int32(t.Attempt), int32(t.MaxAttempts), check.RunAt,
		t.Lease, t.LeaseOwner, nullTime(check.LeaseUntil), nullTime(check.AttemptDeadline), string(input), t.LastError, now)
	if err != nil {
		return interpretTaskError(err, t.ID)
	}
	if tag.RowsAffected() == 0 {
		return taskNotFound(t.ID)
	}
	t.Input = input
	t.RunAt, t.LeaseUntil, t.AttemptDeadline = check.RunAt, check.LeaseUntil, check.AttemptDeadline
	t.UpdatedAt = now
	return nil
}

// TasksOfInstance returns the instance's tasks ordered by step id, locked per
// mode inside a transaction ([] for an instance without tasks, or unknown).
func (q *querier) TasksOfInstance(ctx context.Context, instanceID string, mode store.LockMode) ([]*store.Task, error) {
	sql := tasksOfInstanceSQL
	switch mode {
	case store.LockNone:
	case store.LockWait:
		sql += " FOR UPDATE"
	case store.LockSkipLocked:
		sql += " FOR UPDATE SKIP LOCKED"
	default:
		return nil, fmt.Errorf("%w: unknown lock mode %d", store.ErrInvalidArgument, mode)
	}
	if !storableText(instanceID) {
		return []*store.Task{}, nil
	}
	if q.pool != nil {
		sql = tasksOfInstanceSQL
	}
	return q.queryTasks(ctx, sql, instanceID)
}

// LockClaimable returns up to limit claimable tasks of queues, locked with
// SKIP LOCKED; see claimSQL. ErrInvalidArgument for a limit outside
// 1–store.MaxBatchLimit or more than store.MaxClaimQueues queues.
func (q *querier) LockClaimable(ctx context.Context, queues []string, now time.Time, limit int) ([]*store.Task, error) {
	n, args, err := claimArgs(queues, now, limit)
	if err != nil || n == 0 {
		return []*store.Task{}, err
	}
	return q.queryTasks(ctx, claimSQL(n, limit), args...)
}

// claimArgs checks a claim's arguments and returns how many distinct queues
// it names (0: nothing to claim) and the claim query's arguments.
func claimArgs(queues []string, now time.Time, limit int) (int, []any, error) {
	if err := checkLimit(limit); err != nil {
		return 0, nil, err
	}
	if len(queues) > store.MaxClaimQueues {
		return 0, nil, fmt.Errorf("%w: %d queues, at most %d may be claimed from at once", store.ErrInvalidArgument, len(queues), store.MaxClaimQueues)
	}
	args := make([]any, 1, 1+len(queues))
	args[0] = store.Timestamp(now)
	for _, queue := range queues {
		if err := checkText("queue", queue); err != nil {
			return 0, nil, err
		}
		if !slices.Contains(args[1:], any(queue)) {
			args = append(args, queue)
		}
	}
	return len(args) - 1, args, nil
}

// LockExpired returns up to limit LEASED tasks whose lease ended before now,
// locked with SKIP LOCKED. ErrInvalidArgument for a limit outside
// 1–store.MaxBatchLimit.
func (q *querier) LockExpired(ctx context.Context, now time.Time, limit int) ([]*store.Task, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return q.queryTasks(ctx, expiredSQL, store.Timestamp(now), limit)
}

// CancelOrphanTasks cancels up to limit live tasks of instances that are
// neither RUNNING nor PAUSED, in one statement, and returns how many.
// ErrInvalidArgument for a limit outside 1–store.MaxBatchLimit.
func (q *querier) CancelOrphanTasks(ctx context.Context, limit int) (_ int, err error) {
	defer q.settle(&err) // a write of its own on the pool
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	tag, err := q.db.Exec(ctx, cancelOrphansSQL, limit, q.timestamp())
	if err != nil {
		return 0, interpretError(err, "")
	}
	return int(tag.RowsAffected()), nil
}

// TimeOutInstances moves up to limit instances past their deadline to
// TIMED_OUT in one statement and returns their ids, oldest deadline first
// ([] when none). ErrInvalidArgument for a limit outside
// 1–store.MaxBatchLimit.
func (q *querier) TimeOutInstances(ctx context.Context, now time.Time, limit int) (_ []string, err error) {
	defer q.settle(&err) // a write of its own on the pool
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	rows, err := q.db.Query(ctx, timeOutSQL, store.Timestamp(now), limit, q.timestamp(), timeoutCause)
	if err != nil {
		return nil, interpretError(err, "")
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, interpretError(err, "")
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// Notify wakes every node's listener (see Store.Listen) when the transaction
// commits, or at once on the pool.
func (q *querier) Notify(ctx context.Context) error {
	if _, err := q.db.Exec(ctx, notifySQL); err != nil {
		return interpretError(err, "")
	}
	return nil
}

// checkLimit bounds the limit of the sweeps and of the claim query, like
// BatchUpdateStatus.
func checkLimit(limit int) error {
	if limit < 1 || limit > store.MaxBatchLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", store.ErrInvalidArgument, limit, store.MaxBatchLimit)
	}
	return nil
}

func (q *querier) queryTasks(ctx context.Context, sql string, args ...any) ([]*store.Task, error) {
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	tasks := []*store.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, interpretError(err, "")
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return tasks, nil
}

// scanTask reads the columns of taskColumns.
func scanTask(row pgx.Row) (*store.Task, error) {
	var (
		t                           store.Task
		status                      string
		attempt, maxAttempts        int32
		leaseUntil, attemptDeadline *time.Time
		input                       []byte
	)
	if err := row.Scan(&t.ID, &t.InstanceID, &t.StepID, &t.Queue, &status, &attempt, &maxAttempts, &t.RunAt,
		&t.Lease, &t.LeaseOwner, &leaseUntil, &attemptDeadline, &input, &t.LastError, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	t.Status = store.TaskStatus(status)
	t.Attempt, t.MaxAttempts = int(attempt), int(maxAttempts)
	t.RunAt = t.RunAt.UTC()
	if leaseUntil != nil {
		t.LeaseUntil = leaseUntil.UTC()
	}
	if attemptDeadline != nil {
		t.AttemptDeadline = attemptDeadline.UTC()
	}
	t.Input = compactJSON(input)
	t.CreatedAt = t.CreatedAt.UTC()
	t.UpdatedAt = t.UpdatedAt.UTC()
	return &t, nil
}

// CountByStatus counts instances per status (statuses without instances are
// absent from the map).
func (s *Store) CountByStatus(ctx context.Context) (map[workflow.Status]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM workflow_instances GROUP BY status`)
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	counts := map[workflow.Status]int64{}
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, interpretError(err, "")
		}
		counts[workflow.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return counts, nil
}

var _ store.Counter = (*Store)(nil)

// commitStepSQL is CommitStep: the task's update (t), the instance's
// versioned update (u) and its history row (h), the new tasks (ins) and the
// notification (n), one statement and so one implicit transaction. u runs
// only for the instance t returned, so a stale lease writes nothing; t is
// the first row locked, then the instance (the lock order task → instance).
// When t matched but u did not — the instance moved on since the caller read
// it — flowd_conflict raises SQLSTATE FD409 and the statement, t included,
// is rolled back. A new task whose id or step is taken fails the statement
// with a unique violation, which rolls it back as well.
//
// $1–$14 are the new tasks' columns (as insertTasksSQL), $15 the store's
// clock, $16 the task id, $17 the lease it must hold, $18 the engine's now,
// $19–$28 the task's new fields, $29 the instance, $30 its expected version,
// $31 its expected status, $32 and $33 the new status and state, $34 the
// cause, $35 whether to notify.
const commitStepSQL = commitStepCTEs + `
	CASE WHEN EXISTS (SELECT 1 FROM t) AND NOT EXISTS (SELECT 1 FROM u)
		THEN flowd_conflict(` + commitVersionMiss + `) END`

// commitStepCTEs is commitStepSQL up to its last column, the conflict check.
const commitStepCTEs = `WITH t AS (
	UPDATE workflow_tasks SET status = $19, attempt = $20, max_attempts = $21, run_at = $22,
		lease = $23, lease_owner = $24, lease_until = $25, attempt_deadline = $26, input = $27::jsonb,
		last_error = $28, updated_at = $15
	WHERE id = $16 AND instance_id = $29 AND status = 'LEASED' AND lease = $17 AND lease_until > $18
	RETURNING instance_id
), u AS (
	UPDATE workflow_instances SET state = $33::jsonb, status = $32, version = version + 1, updated_at = $15
	WHERE id = (SELECT instance_id FROM t) AND version = $30 AND status = $31
	RETURNING id, version, status, state
), h AS (
	INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
	SELECT id, version, status, flowd_history_entry(id, version, (SELECT state FROM workflow_instances WHERE id = $29), state), $15, $34 FROM u
), ins AS (
	` + insertTasksPrefix + `$15, $15
	FROM ` + newTasks1 + `
	WHERE EXISTS (SELECT 1 FROM u)
	RETURNING 1
), n AS (
	SELECT pg_notify('` + notifyChannel + `', '') FROM u WHERE $35::boolean
)
SELECT (SELECT version FROM u), EXISTS (SELECT 1 FROM t), (SELECT count(*) FROM ins), (SELECT count(*) FROM n),`

// commitVersionMiss is the message of a commit whose instance moved on.
const commitVersionMiss = `format('workflow %s is no longer %s at version %s', $29::text, $31::text, $30::bigint)`

// commitStrictSQL is commitStepSQL that also fails, with FD409, when the
// task is no longer leased under the lease: in a pipeline of several
// commits, every miss has to roll all of them back.
const commitStrictSQL = commitStepCTEs + `
	CASE WHEN NOT EXISTS (SELECT 1 FROM u)
		THEN flowd_conflict(CASE WHEN EXISTS (SELECT 1 FROM t) THEN ` + commitVersionMiss + `
			ELSE format('task %s is no longer leased under this lease, or its lease ended', $16::text) END) END`

// CommitStep writes c in one statement; see store.EngineQuerier and
// commitStepSQL.
func (q *querier) CommitStep(ctx context.Context, c store.StepCommit) (_ int64, err error) {
	defer q.settle(&err) // a write of its own on the pool
	pc, err := q.prepareCommit(c)
	if err != nil {
		return 0, err
	}
	return pc.finish(q.db.QueryRow(ctx, commitStepSQL, pc.args...))
}

// CommitSteps writes several commits as one implicit transaction; see
// CommitGroup.
func (q *querier) CommitSteps(ctx context.Context, cs []store.StepCommit) ([]int64, error) {
	_, vs, err := q.CommitGroup(ctx, nil, cs, nil)
	return vs, err
}

// CommitGroup writes creates and commits as one implicit transaction:
// their statements go out in one pipeline with a single Sync, so that an
// error in any of them rolls back all of them (or, inside WithTx, aborts
// the caller's transaction). Creates run as createStrict statements and
// commits as commitStrictSQL, which raise FD409 for an instance not created
// or a stale lease: there is no partial result.
//
// With a claim it is an explicit transaction in two pipelines: BEGIN, the
// creates, the commits and the claim query (claimLockingInstancesSQL); then,
// once decided, the claim's writes and COMMIT (finishClaim). Inside WithTx
// the claim runs after the group in the caller's transaction.
func (q *querier) CommitGroup(ctx context.Context, creates []store.CreateParams, commits []store.StepCommit, claim *store.GroupClaim) ([]*workflow.Instance, []int64, error) {
	if err := claim.Check(); err != nil {
		return nil, nil, err
	}
	g, err := q.prepareGroup(creates, commits)
	if err != nil {
		return nil, nil, err
	}
	var claimSQL string
	var claimArgv []any
	if claim != nil {
		p := claim.Params
		n, args, err := claimArgs(p.Queues, p.Now, p.Limit)
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			// No queue: nothing to lock, and nothing decide may write.
			if err := decideNothing(claim.Decide); err != nil {
				return nil, nil, err
			}
			claim = nil
		} else {
			claimSQL, claimArgv = claimLockingInstancesSQL(n, p.Limit), args
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
		// Inside WithTx: the group and then the claim, in the caller's
		// transaction.
		if err := g.send(ctx, q.db); err != nil {
			return nil, nil, err
		}
		if err := q.claimInTx(ctx, claimSQL, claimArgv, claim.Decide); err != nil {
			return nil, nil, err
		}
	default:
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
			pws, err := q.decideClaim(locked, claim.Decide)
			if err != nil {
				return err
			}
			return finishClaim(ctx, conn, pws)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return g.results()
}

// decideNothing calls decide for a claim that locked nothing: it may write
// nothing.
func decideNothing(decide func([]store.Claimable) ([]*store.ClaimWrite, error)) error {
	writes, err := decide([]store.Claimable{})
	if err != nil {
		return err
	}
	return store.CheckClaimWrites(nil, writes)
}

// preparedGroup is a checked CommitGroup's statements and, once read, their
// results.
type preparedGroup struct {
	pcs      []*preparedCreate
	pms      []*preparedCommit
	created  []bool
	versions []int64
}

func (q *querier) prepareGroup(creates []store.CreateParams, commits []store.StepCommit) (*preparedGroup, error) {
	n := len(creates) + len(commits)
	g := &preparedGroup{
		pcs: make([]*preparedCreate, len(creates)), pms: make([]*preparedCommit, len(commits)),
		created: make([]bool, len(creates)), versions: make([]int64, len(commits)),
	}
	for i, p := range creates {
		pc, err := q.prepareCreate(p)
		if err != nil {
			return nil, fmt.Errorf("create %d of %d: %w", i+1, n, err)
		}
		g.pcs[i] = pc
	}
	for i, c := range commits {
		pm, err := q.prepareCommit(c)
		if err != nil {
			return nil, fmt.Errorf("commit %d of %d: %w", len(creates)+i+1, n, err)
		}
		g.pms[i] = pm
	}
	return g, nil
}

func (g *preparedGroup) empty() bool { return len(g.pcs)+len(g.pms) == 0 }

// queue adds the group's statements to b.
func (g *preparedGroup) queue(b *pgx.Batch) {
	for _, pc := range g.pcs {
		b.Queue(pc.strict, pc.args...)
	}
	for _, pm := range g.pms {
		b.Queue(commitStrictSQL, pm.args...)
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
	for i, pc := range g.pcs {
		var stale, keyUsed bool
		if err := br.QueryRow().Scan(&g.created[i], &stale, &keyUsed, new(any)); err != nil && firstErr == nil {
			firstErr = interpretError(err, pc.p.ID)
		}
	}
	for i, pm := range g.pms {
		v, err := pm.result(br.QueryRow())
		if err != nil && firstErr == nil {
			firstErr = err
		}
		g.versions[i] = v
	}
	return firstErr
}

// results reports a committed group: the created instances and the
// commits' new versions.
func (g *preparedGroup) results() ([]*workflow.Instance, []int64, error) {
	insts := make([]*workflow.Instance, len(g.pcs))
	for i, pc := range g.pcs {
		inst, err := pc.result(g.created[i], false)
		if err != nil {
			// Not reached: the statement raised FD409.
			return nil, nil, err
		}
		insts[i] = inst
	}
	for _, pm := range g.pms {
		pm.fill()
	}
	return insts, g.versions, nil
}

// preparedCommit is a checked StepCommit with its statement's arguments.
type preparedCommit struct {
	c    store.StepCommit
	task store.Task
	rows []store.Task
	now  time.Time
	args []any
}

func (q *querier) prepareCommit(c store.StepCommit) (*preparedCommit, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := checkText("cause", c.Cause); err != nil {
		return nil, err
	}
	task := *c.Task
	if task.Input == nil {
		task.Input = json.RawMessage("null")
	}
	if err := checkTask(&task); err != nil {
		return nil, err
	}
	if !storableText(c.Lease) {
		return nil, fmt.Errorf("%w: the lease is not valid UTF-8 text without NUL characters", store.ErrInvalidArgument)
	}
	normaliseTaskTimes(&task)
	stateJSON, err := marshalState(c.State)
	if err != nil {
		return nil, err
	}
	now := q.timestamp()
	rows, cols, err := prepareTasks(c.Insert, now)
	if err != nil {
		return nil, err
	}
	args := append(cols.args(), now, task.ID, c.Lease, store.Timestamp(c.Now),
		string(task.Status), int32(task.Attempt), int32(task.MaxAttempts), task.RunAt,
		task.Lease, task.LeaseOwner, nullTime(task.LeaseUntil), nullTime(task.AttemptDeadline), string(task.Input), task.LastError,
		task.InstanceID, c.ExpectedVersion, string(c.From), string(c.Status), stateJSON, c.Cause, c.Notify)
	return &preparedCommit{c: c, task: task, rows: rows, now: now, args: args}, nil
}

// result reads the statement's row: the new version, or why there is none.
func (pc *preparedCommit) result(row pgx.Row) (int64, error) {
	var (
		version          *int64
		leased           bool
		inserted, notify int
	)
	err := row.Scan(&version, &leased, &inserted, &notify, new(any))
	switch {
	case err != nil:
		return 0, interpretError(err, pc.task.InstanceID)
	case !leased:
		return 0, &store.ConflictError{ID: pc.task.InstanceID, Actual: -1,
			Reason: fmt.Sprintf("task %q is no longer leased under this lease, or its lease ended", pc.task.ID)}
	case version == nil || inserted != len(pc.rows):
		// Not reached: flowd_conflict or a unique violation failed the
		// statement. Report it rather than trust it.
		return 0, fmt.Errorf("postgres: commit of task %q wrote version %v and %d of %d tasks", pc.task.ID, version, inserted, len(pc.rows))
	}
	return *version, nil
}

// finish is result for a statement of its own, followed by fill.
func (pc *preparedCommit) finish(row pgx.Row) (int64, error) {
	v, err := pc.result(row)
	if err != nil {
		return 0, err
	}
	pc.fill()
	return v, nil
}

// fill gives the caller's task and new tasks what was stored.
func (pc *preparedCommit) fill() {
	pc.task.UpdatedAt = pc.now
	*pc.c.Task = pc.task
	for i, t := range pc.c.Insert {
		*t = pc.rows[i]
	}
}
