package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The engine's operations (store.TaskQuerier) on SQLite.
//
// # Locks
//
// SQLite has neither FOR UPDATE nor SKIP LOCKED, and needs neither: every
// write transaction (each write and claim) is BEGIN IMMEDIATE on the single
// write connection, so it holds the database's write lock from its first
// statement to its end. Whatever a transaction reads cannot change under
// it, and no other transaction can hold a row it would have to skip. Two
// claimers therefore never get the same task, and the lock order (tasks,
// then instance) cannot deadlock because there is only one lock. Reads use
// the read pool.

var (
	_ store.TaskQuerier = (*querier)(nil)
	_ store.TaskQuerier = (*Store)(nil)
)

// taskColumns is the column list every task query selects, in the order
// scanTask reads them.
const taskColumns = newTaskColumns + `, output`

// newTaskColumns are the columns a new task is inserted with (it has no
// output yet).
const newTaskColumns = `id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at, iteration,
priority, concurrency_key, concurrency_limit, rate_key, rate_per_second, rate_burst, held, attempt_timeout_us`

// qualify prefixes every column of a column list with alias.
func qualify(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

const insertTaskSQL = `INSERT INTO workflow_tasks (` + newTaskColumns + `)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)`

// prepareTasks returns copies of new tasks completed as they will be stored.
func prepareTasks(tasks []*store.Task, now time.Time) ([]store.Task, error) {
	rows := make([]store.Task, len(tasks))
	for i, t := range tasks {
		if t == nil {
			return nil, fmt.Errorf("%w: task %d is nil", store.ErrInvalidArgument, i)
		}
		r := *t
		if r.Iteration < 0 {
			return nil, fmt.Errorf("%w: task %q: iteration %d is negative", store.ErrInvalidArgument, r.ID, r.Iteration)
		}
		if r.ID == "" {
			r.ID = store.NewID()
		}
		if r.Status == "" {
			r.Status = store.TaskQueued
		}
		input, err := taskInput(r.Input)
		if err != nil {
			return nil, fmt.Errorf("task %q: %w", r.ID, err)
		}
		r.Input = input
		normaliseTaskTimes(&r)
		if err := store.NormaliseNewTask(&r); err != nil {
			return nil, err
		}
		r.CreatedAt, r.UpdatedAt = store.Timestamp(now), store.Timestamp(now)
		rows[i] = r
	}
	return rows, nil
}

// insertTasks inserts prepared rows with one statement per task (prepared
// once: stmtCache): SQLite runs in process, so this costs no round trips,
// and a failure names its task.
func insertTasks(ctx context.Context, c dbtx, rows []store.Task) error {
	for _, r := range rows {
		_, err := c.ExecContext(ctx, insertTaskSQL,
			r.ID, r.InstanceID, r.StepID, r.Queue, string(r.Status), r.Attempt, r.MaxAttempts, micros(r.RunAt),
			r.Lease, r.LeaseOwner, zeroNullMicros(r.LeaseUntil), zeroNullMicros(r.AttemptDeadline),
			string(r.Input), r.LastError, micros(r.CreatedAt), r.Iteration,
			r.Flow.Priority, nullKey(r.Flow.ConcurrencyLimit > 0, r.Flow.ConcurrencyKey), r.Flow.ConcurrencyLimit,
			nullKey(r.Flow.RatePerSecond > 0, r.Flow.RateKey), r.Flow.RatePerSecond, r.Flow.RateBurst, r.Held, r.AttemptTimeout.Microseconds())
		if err == nil {
			continue
		}
		if foreignKeyViolation(err) {
			return fmt.Errorf("task %q: %w", r.ID, store.NotFound(r.InstanceID))
		}
		err = interpretError(ctx, err)
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("task %q (workflow %q, step %q, iteration %d): %w", r.ID, r.InstanceID, r.StepID, r.Iteration, store.ErrExists)
		}
		return fmt.Errorf("task %q: %w", r.ID, err)
	}
	return nil
}

// Task returns the task: a plain read.
// Errors: ErrNotFound ("task %q").
func (q *querier) Task(ctx context.Context, id string) (*store.Task, error) {
	t, err := scanTask(q.read.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM workflow_tasks WHERE id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, taskNotFound(id)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	return t, nil
}

// TasksOfInstance returns the instance's tasks ordered by step id ([] when it
// has none, also for an unknown instance).
func (q *querier) TasksOfInstance(ctx context.Context, instanceID string) ([]*store.Task, error) {
	const query = `SELECT ` + taskColumns + ` FROM workflow_tasks WHERE instance_id = ?1 ORDER BY step_id, iteration`
	return queryTasks(ctx, q.read, query, instanceID)
}

// claimSQL selects the claimable tasks, at most limit of them. It is the
// engine's hot path, so it
// reads at most limit index entries per queue, whatever the backlog:
//   - for each distinct queue of the JSON array ?1, the correlated subquery
//     walks the partial index workflow_tasks_claim_idx (queue, priority,
//     run_at, id: the whole delivery order, no sort even among tasks that
//     share a run_at) once per priority, in run_at and id order (the
//     literal status = 'QUEUED' is what lets SQLite use a
//     partial index; INDEXED BY makes the statement fail rather than scan if
//     an edit ever breaks that) and looks up each task's instance by primary
//     key (CROSS JOIN keeps the task as the outer loop), stopping at limit
//     claimable tasks;
//   - the outer query sorts those few (at most queues × limit) rows.
//
// A plain join of the tasks of all queues, sorted once, has to read and sort
// every ready task first: measured with 37,000 queued tasks it took 120–950 ms
// per claim against 0.5–1.3 ms for this form, with the same result.
// A task is claimable when it is not held (store.Task.Held: the engine
// decided, when it wrote the instance's status, that the status holds it);
// the claim reads task rows alone, and claimOn reads their instances.
//
// Each queue is walked once per priority (5 down to 1), each an equality
// on the index's second column, so that run_at <= ?2 bounds the range; the
// outer query keeps the highest priorities first, then the oldest. Tasks
// whose concurrency key is at its limit, or whose bucket has no token, are
// left out (claimFlowFilter) so that they do not take the places of tasks
// that can go; the claim then checks the keys exactly (gateFlowOn).
//
// The limit is a literal, not a parameter: SQLite plans with a LIMIT
// parameter's value, so a prepared claim whose limit changed from the last
// call was parsed and planned again at every step (a tenth of the CPU time
// of the workflow benchmark, whose claims ask for as many tasks as workers
// wait). A claimer uses a few limits, each one statement the cache keeps.
func claimSQL(limit int) string {
	return fmt.Sprintf(claimSQLFormat, limit)
}

var claimSQLFormat = `SELECT ` + qualify("t", taskColumns) + `
FROM (SELECT DISTINCT value AS queue FROM json_each(?1)) AS qs
CROSS JOIN (SELECT value AS priority FROM json_each('[5, 4, 3, 2, 1]')) AS ps
CROSS JOIN workflow_tasks AS t ON t.rowid IN (
    SELECT c.rowid FROM workflow_tasks AS c INDEXED BY workflow_tasks_claim_idx
    WHERE c.status = 'QUEUED' AND c.queue = qs.queue AND c.priority = ps.priority AND c.run_at <= ?2
      AND NOT c.held` + claimFlowFilter + `
    ORDER BY c.run_at, c.id
    LIMIT %[1]d
)
ORDER BY t.priority DESC, t.run_at, t.id
LIMIT %[1]d`

// claimable returns up to limit QUEUED tasks of queues with run_at <= now
// that are not held, oldest run_at first (then id); [] when none. c is the write transaction that
// claims them: no other transaction can claim them before it ends (see
// Locks). Errors: ErrInvalidArgument (limit outside 1–10000, more than
// store.MaxClaimQueues queues).
func claimable(ctx context.Context, c dbtx, queues []string, now time.Time, limit int) ([]*store.Task, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if len(queues) > store.MaxClaimQueues {
		return nil, fmt.Errorf("%w: %d queues, at most %d may be claimed from at once", store.ErrInvalidArgument, len(queues), store.MaxClaimQueues)
	}
	if len(queues) == 0 {
		return []*store.Task{}, nil
	}
	// The queues travel as one JSON array parameter, never as SQL text.
	list, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	return queryTasks(ctx, c, claimSQL(limit), string(list), micros(now))
}

// The reads of Due, one per store.DueKind. They run on the read pool (or in
// the caller's transaction): the engine's writes guard on what they read.
var (
	// dueTimeoutsSQL spells the status and deadline terms exactly as the
	// WHERE clause of the partial index workflow_instances_deadline_idx, so
	// SQLite uses it; deadline < ?1 also implies its "deadline IS NOT NULL".
	dueTimeoutsSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances INDEXED BY workflow_instances_deadline_idx
WHERE status IN ('RUNNING', 'PAUSED') AND deadline IS NOT NULL AND deadline < ?1
ORDER BY deadline, id
LIMIT ?2`

	// dueLeasesSQL uses the partial index workflow_tasks_expiry_idx
	// (lease_until) and looks up each task's instance by primary key.
	dueLeasesSQL = `SELECT ` + dueTaskColumns + `
FROM workflow_tasks AS t CROSS JOIN workflow_instances AS i ON i.id = t.instance_id
WHERE t.status = 'LEASED' AND t.lease_until < ?1
ORDER BY t.lease_until, t.id
LIMIT ?2`

	// dueTaskColumns are a task's columns followed by its instance's.
	dueTaskColumns = qualify("t", taskColumns) + ", " + instanceColumnsOf("i")

	// dueAbandonedSQL reads the child workflows that still run through
	// their partial index (migration 00016) and looks up each one's
	// parent by primary key.
	dueAbandonedSQL = `SELECT ` + instanceColumnsOf("c") + `
FROM workflow_instances AS c INDEXED BY workflow_instances_abandoned_idx
CROSS JOIN workflow_instances AS p ON p.id = c.parent_id
WHERE c.parent_id IS NOT NULL AND c.status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED')
	AND p.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
LIMIT ?1`
)

// Due reads up to p.Limit items of due work; see store.TaskQuerier.
func (q *querier) Due(ctx context.Context, p store.DueParams) ([]store.DueItem, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if items, ok, err := q.dueReads().Read(ctx, p); ok {
		return items, err
	}
	items := []store.DueItem{}
	if p.Kind == store.DueTimeouts || p.Kind == store.DueAbandoned {
		query, args := dueTimeoutsSQL, []any{micros(p.Now), p.Limit}
		if p.Kind == store.DueAbandoned {
			query, args = dueAbandonedSQL, []any{p.Limit}
		}
		rows, err := q.read.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		defer rows.Close()
		for rows.Next() {
			inst, err := scanInstance(rows)
			if err != nil {
				return nil, interpretError(ctx, err)
			}
			items = append(items, store.DueItem{Instance: inst})
		}
		if err := rows.Err(); err != nil {
			return nil, interpretError(ctx, err)
		}
		return items, nil
	}
	query, args := dueLeasesSQL, []any{micros(p.Now), p.Limit}
	rows, err := q.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	insts := map[string]*workflow.Instance{}
	for rows.Next() {
		var ir instanceScan
		t, err := scanTask(taskThenInstance{rows, &ir})
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		inst := insts[t.InstanceID]
		if inst == nil {
			if inst, err = ir.instance(); err != nil {
				return nil, err
			}
			insts[t.InstanceID] = inst
		}
		items = append(items, store.DueItem{Instance: inst, Task: t})
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return items, nil
}

// checkLimit bounds the limit of the engine's batch queries like
// BatchStatusParams.Limit.
func checkLimit(limit int) error {
	if limit < 1 || limit > store.MaxBatchLimit {
		return fmt.Errorf("%w: limit %d is outside 1–%d", store.ErrInvalidArgument, limit, store.MaxBatchLimit)
	}
	return nil
}

func taskNotFound(id string) error { return fmt.Errorf("task %q: %w", id, store.ErrNotFound) }

// taskInput validates and compacts a task's input; nil (or blank) is JSON
// null.
func taskInput(in json.RawMessage) (json.RawMessage, error) {
	in = bytes.TrimSpace(in)
	if len(in) == 0 {
		return json.RawMessage("null"), nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, in); err != nil {
		return nil, fmt.Errorf("%w: input is not valid JSON: %w", store.ErrInvalidArgument, err)
	}
	return json.RawMessage(out.Bytes()), nil
}

// normaliseTaskTimes gives t's times the stored precision (UTC, µs); a zero
// LeaseUntil or AttemptDeadline stays zero (NULL).
func normaliseTaskTimes(t *store.Task) {
	t.RunAt = store.Timestamp(t.RunAt)
	if !t.LeaseUntil.IsZero() {
		t.LeaseUntil = store.Timestamp(t.LeaseUntil)
	}
	if !t.AttemptDeadline.IsZero() {
		t.AttemptDeadline = store.Timestamp(t.AttemptDeadline)
	}
}

// queryTasks runs a query that selects task columns; [] when no row.
func queryTasks(ctx context.Context, c dbtx, query string, args ...any) ([]*store.Task, error) {
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	tasks := []*store.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return tasks, nil
}

// scanTask reads the taskColumns of one row. Errors are returned as they are
// (sql.ErrNoRows included) for the caller to interpret.
func scanTask(row scanner) (*store.Task, error) {
	var (
		t                          store.Task
		status, input              string
		output                     sql.NullString
		runAt, createdAt, updated  int64
		leaseUntil, attemptExpires sql.NullInt64
		concurrencyKey, rateKey    sql.NullString
		attemptTimeout             int64
	)
	if err := row.Scan(&t.ID, &t.InstanceID, &t.StepID, &t.Queue, &status, &t.Attempt, &t.MaxAttempts, &runAt,
		&t.Lease, &t.LeaseOwner, &leaseUntil, &attemptExpires, &input, &t.LastError, &createdAt, &updated, &t.Iteration,
		&t.Flow.Priority, &concurrencyKey, &t.Flow.ConcurrencyLimit, &rateKey, &t.Flow.RatePerSecond, &t.Flow.RateBurst, &t.Held, &attemptTimeout, &output); err != nil {
		return nil, err
	}
	t.Flow.ConcurrencyKey, t.Flow.RateKey = concurrencyKey.String, rateKey.String
	t.AttemptTimeout = time.Duration(attemptTimeout) * time.Microsecond
	t.Status = store.TaskStatus(status)
	t.RunAt = fromMicros(runAt)
	t.LeaseUntil = fromNullMicros(leaseUntil)
	t.AttemptDeadline = fromNullMicros(attemptExpires)
	t.Input = json.RawMessage(input)
	if output.Valid {
		t.Output = json.RawMessage(output.String)
	}
	t.CreatedAt = fromMicros(createdAt)
	t.UpdatedAt = fromMicros(updated)
	return &t, nil
}

// ClaimTasks leases the claimable tasks in one write transaction; see
// store.TaskQuerier. Nothing else writes meanwhile, so what the claim
// reads is what it writes on.
func (q *querier) ClaimTasks(ctx context.Context, p store.ClaimParams) ([]store.Claimable, store.HeldBack, error) {
	var none store.HeldBack
	if err := p.Check(); err != nil {
		return nil, none, err
	}
	var (
		claimed []store.Claimable
		held    store.HeldBack
		leftOut bool
	)
	err := q.write(ctx, func(c dbtx) error {
		var err error
		claimed, held, leftOut, err = q.claimOn(ctx, c, p)
		return err
	})
	switch {
	case err != nil:
		return nil, none, err
	case leftOut:
		return nil, none, fmt.Errorf("claim: %w", store.ErrFlowMiss)
	}
	return claimed, held, nil
}

// claimOn is ClaimTasks on c, inside the write transaction the caller
// holds: it locks nothing (the transaction is the only writer), keeps the
// tasks their flow control lets go, leases them
// (store.Task.DeliverForClaim) and writes the leases with their flow
// rows. It returns the tasks leased and what their keys held back, for
// the caller to report once the transaction has committed; leftOut
// reports a claim left out by a flow guard's miss: nothing leased, and
// nothing held back to report (what it read has moved on).
func (q *querier) claimOn(ctx context.Context, c dbtx, p store.ClaimParams) (claimed []store.Claimable, held store.HeldBack, leftOut bool, err error) {
	var none store.HeldBack
	tasks, err := claimable(ctx, c, p.Queues, p.Now, p.Limit)
	if err != nil {
		return nil, none, false, err
	}
	locked := make([]store.Claimable, len(tasks))
	insts := map[string]*workflow.Instance{}
	for i, t := range tasks {
		inst := insts[t.InstanceID]
		if inst == nil {
			if inst, err = getInstance(ctx, c, t.InstanceID); err != nil {
				return nil, none, false, err
			}
			insts[t.InstanceID] = inst
		}
		locked[i] = store.Claimable{Task: t, Instance: inst}
	}
	kept, taken, held, err := gateFlowOn(ctx, c, locked, p)
	if err != nil {
		return nil, none, false, err
	}
	now := q.timestamp()
	leases := make([]*store.Task, len(kept))
	for i, cl := range kept {
		cl.Task.DeliverForClaim(p, time.UnixMicro(now).UTC())
		leases[i] = cl.Task
	}
	if leftOut, err = writeLeases(ctx, c, leases, taken, now); err != nil || leftOut {
		return nil, none, leftOut, err
	}
	return kept, held, false, nil
}

// writeLeases writes a claim's leases with their flow rows: the buckets
// it took tokens from and the leases' change to their keys' LEASED counts.
// A claim with flow rows writes after a savepoint and rolls back to it on
// a guard's miss (leftOut), so that what the transaction wrote before (a
// group's writes) stays.
func writeLeases(ctx context.Context, c dbtx, leases []*store.Task, taken []store.BucketTake, now int64) (leftOut bool, err error) {
	if len(leases) == 0 {
		return false, nil
	}
	changes := store.LeasedChanges(nil, leases)
	if len(taken) == 0 && len(changes) == 0 {
		return false, leaseTasks(ctx, c, leases, now)
	}
	if _, err := c.ExecContext(ctx, "SAVEPOINT "+claimSavepoint); err != nil {
		return false, interpretError(ctx, err)
	}
	err = storeBuckets(ctx, c, taken)
	if err == nil {
		err = leaseTasks(ctx, c, leases, now)
	}
	if err == nil {
		err = applyLeased(ctx, c, changes)
	}
	if errors.Is(err, store.ErrFlowMiss) {
		if _, err := c.ExecContext(ctx, "ROLLBACK TO "+claimSavepoint); err != nil {
			return false, interpretError(ctx, err)
		}
		leftOut, err = true, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := c.ExecContext(ctx, "RELEASE "+claimSavepoint); err != nil {
		return false, interpretError(ctx, err)
	}
	return leftOut, nil
}

// claimSavepoint is the savepoint of a claim with flow control.
const claimSavepoint = "flowd_claim"

// leaseTasks writes the leases of tasks the claim read QUEUED.
func leaseTasks(ctx context.Context, c dbtx, leases []*store.Task, now int64) error {
	for _, t := range leases {
		res, err := c.ExecContext(ctx,
			`UPDATE workflow_tasks SET status = 'LEASED', attempt = ?2, lease = ?3, lease_owner = ?4, lease_until = ?5,
			attempt_deadline = ?6, updated_at = ?7
			WHERE id = ?1 AND status = 'QUEUED'`,
			t.ID, t.Attempt, t.Lease, t.LeaseOwner, micros(t.LeaseUntil), zeroNullMicros(t.AttemptDeadline), now)
		if err != nil {
			return fmt.Errorf("task %q: %w", t.ID, interpretError(ctx, err))
		}
		// Not reached: the claim read the task QUEUED in this transaction.
		if err := oneRow(res, fmt.Sprintf("claim of task %q", t.ID)); err != nil {
			return err
		}
	}
	return nil
}

// on returns a querier whose reads and writes run on c, inside the write
// transaction the caller holds.
func (q *querier) on(c dbtx) *querier {
	return &querier{read: c, write: func(_ context.Context, fn func(dbtx) error) error { return fn(c) }, now: q.now}
}

// oneRow checks that a statement the transaction's own reads guarantee
// changed exactly one row did.
func oneRow(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	if n != 1 {
		return fmt.Errorf("sqlite: %s changed %d rows, want 1", what, n)
	}
	return nil
}

// nullKey is a flow-control key as stored: NULL when the task has no such
// key (set false).
func nullKey(set bool, key string) any {
	if !set {
		return nil
	}
	return key
}
