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

// The engine's operations (store.EngineQuerier) on SQLite.
//
// # Locks
//
// SQLite has neither FOR UPDATE nor SKIP LOCKED, and needs neither: every
// write transaction (WithTx, and each write or Lock* method called on the
// Store) is BEGIN IMMEDIATE on the single write connection, so it holds the
// database's write lock from its first statement to its end. Whatever a
// transaction reads cannot change under it, which is what LockWait promises,
// and no other transaction can hold a row it would have to skip, which is what
// LockSkipLocked promises: all three lock modes run the same plain SELECT. Two
// claimers therefore never get the same task, and the lock order (tasks, then
// instance) cannot deadlock because there is only one lock.
//
// Called on the Store rather than inside WithTx, the Lock* methods, the
// sweeps and every write run in their own write transaction (the lock ends
// when the method returns); reads with LockNone use the read pool.

var (
	_ store.EngineQuerier = (*querier)(nil)
	_ store.EngineQuerier = (*Store)(nil)
)

// taskColumns is the column list every task query selects, in the order
// scanTask reads them.
const taskColumns = `id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at`

// qualify prefixes every column of a column list with alias.
func qualify(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

const insertTaskSQL = `INSERT INTO workflow_tasks (` + taskColumns + `)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15)`

// InsertTasks inserts the tasks in one transaction (one savepoint inside
// WithTx): all or none. An empty ID gets store.NewID(), an empty Status is
// QUEUED, nil Input is JSON null; CreatedAt and UpdatedAt are the store clock.
// On success every *Task holds exactly what was stored (times normalised,
// input compacted). Errors: ErrExists when a task id, or a task for the same
// (instance, step), exists already (also within tasks); ErrNotFound when the
// instance does not exist; ErrInvalidArgument for a nil task, input that is
// not JSON, or a value the schema rejects (status, attempts).
func (q *querier) InsertTasks(ctx context.Context, tasks []*store.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	rows, err := prepareTasks(tasks, q.now())
	if err != nil {
		return err
	}
	if err := q.write(ctx, func(c dbtx) error { return insertTasks(ctx, c, rows) }); err != nil {
		return err
	}
	for i, t := range tasks {
		*t = rows[i]
	}
	return nil
}

// prepareTasks returns copies of new tasks completed as they will be stored.
func prepareTasks(tasks []*store.Task, now time.Time) ([]store.Task, error) {
	rows := make([]store.Task, len(tasks))
	for i, t := range tasks {
		if t == nil {
			return nil, fmt.Errorf("%w: task %d is nil", store.ErrInvalidArgument, i)
		}
		r := *t
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
		r.CreatedAt, r.UpdatedAt = store.Timestamp(now), store.Timestamp(now)
		rows[i] = r
	}
	return rows, nil
}

// insertTasks inserts prepared rows with one prepared statement, executed
// per task: SQLite runs in process, so this costs no round trips, and a
// failure names its task.
func insertTasks(ctx context.Context, c dbtx, rows []store.Task) error {
	if len(rows) == 0 {
		return nil
	}
	stmt, err := c.PrepareContext(ctx, insertTaskSQL)
	if err != nil {
		return interpretError(ctx, err)
	}
	defer stmt.Close()
	for _, r := range rows {
		_, err := stmt.ExecContext(ctx,
			r.ID, r.InstanceID, r.StepID, r.Queue, string(r.Status), r.Attempt, r.MaxAttempts, micros(r.RunAt),
			r.Lease, r.LeaseOwner, zeroNullMicros(r.LeaseUntil), zeroNullMicros(r.AttemptDeadline),
			string(r.Input), r.LastError, micros(r.CreatedAt))
		if err == nil {
			continue
		}
		if foreignKeyViolation(err) {
			return fmt.Errorf("task %q: %w", r.ID, store.NotFound(r.InstanceID))
		}
		err = interpretError(ctx, err)
		if errors.Is(err, store.ErrExists) {
			return fmt.Errorf("task %q (workflow %q, step %q): %w", r.ID, r.InstanceID, r.StepID, store.ErrExists)
		}
		return fmt.Errorf("task %q: %w", r.ID, err)
	}
	return nil
}

// LockTask returns the task. Inside WithTx the transaction already holds the
// write lock; on the Store it reads in a write transaction of its own.
// Errors: ErrNotFound ("task %q").
func (q *querier) LockTask(ctx context.Context, id string) (*store.Task, error) {
	var t *store.Task
	err := q.write(ctx, func(c dbtx) error {
		var err error
		t, err = scanTask(c.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM workflow_tasks WHERE id = ?1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return taskNotFound(id)
		}
		if err != nil {
			return interpretError(ctx, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// UpdateTask writes every mutable field of t and sets t.UpdatedAt to the store
// clock; instance, step, queue and created_at never change. Zero LeaseUntil
// and AttemptDeadline are stored as NULL, nil Input as JSON null. On success t
// holds what was stored. Errors: ErrNotFound ("task %q"); ErrInvalidArgument
// for input that is not JSON or a value the schema rejects.
func (q *querier) UpdateTask(ctx context.Context, t *store.Task) error {
	if t == nil {
		return fmt.Errorf("%w: nil task", store.ErrInvalidArgument)
	}
	r := *t
	input, err := taskInput(r.Input)
	if err != nil {
		return fmt.Errorf("task %q: %w", r.ID, err)
	}
	r.Input = input
	normaliseTaskTimes(&r)
	r.UpdatedAt = store.Timestamp(q.now())
	err = q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx,
			`UPDATE workflow_tasks SET status = ?2, attempt = ?3, max_attempts = ?4, run_at = ?5,
			lease = ?6, lease_owner = ?7, lease_until = ?8, attempt_deadline = ?9,
			input = ?10, last_error = ?11, updated_at = ?12
			WHERE id = ?1`,
			r.ID, string(r.Status), r.Attempt, r.MaxAttempts, micros(r.RunAt),
			r.Lease, r.LeaseOwner, zeroNullMicros(r.LeaseUntil), zeroNullMicros(r.AttemptDeadline),
			string(r.Input), r.LastError, micros(r.UpdatedAt))
		if err != nil {
			return fmt.Errorf("task %q: %w", r.ID, interpretError(ctx, err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return interpretError(ctx, err)
		}
		if n == 0 {
			return taskNotFound(r.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// What the caller did not give (created_at, the immutable columns) stays
	// as the caller had it; everything written is as stored.
	t.Status, t.Attempt, t.MaxAttempts, t.RunAt = r.Status, r.Attempt, r.MaxAttempts, r.RunAt
	t.Lease, t.LeaseOwner, t.LeaseUntil, t.AttemptDeadline = r.Lease, r.LeaseOwner, r.LeaseUntil, r.AttemptDeadline
	t.Input, t.LastError, t.UpdatedAt = r.Input, r.LastError, r.UpdatedAt
	return nil
}

// TasksOfInstance returns the instance's tasks ordered by step id ([] when it
// has none, also for an unknown instance). Every mode runs the same query (see
// Locks); LockNone called on the Store reads from the read pool, the locking
// modes in a write transaction. Errors: ErrInvalidArgument for an unknown mode.
func (q *querier) TasksOfInstance(ctx context.Context, instanceID string, mode store.LockMode) ([]*store.Task, error) {
	const query = `SELECT ` + taskColumns + ` FROM workflow_tasks WHERE instance_id = ?1 ORDER BY step_id`
	switch mode {
	case store.LockNone:
		return queryTasks(ctx, q.read, query, instanceID)
	case store.LockWait, store.LockSkipLocked:
		var tasks []*store.Task
		err := q.write(ctx, func(c dbtx) error {
			var err error
			tasks, err = queryTasks(ctx, c, query, instanceID)
			return err
		})
		return tasks, err
	}
	return nil, fmt.Errorf("%w: lock mode %d", store.ErrInvalidArgument, int(mode))
}

// claimSQL selects the claimable tasks. It is the engine's hot path, so it
// reads at most limit index entries per queue, whatever the backlog:
//   - for each distinct queue of the JSON array ?1, the correlated subquery
//     walks the partial index workflow_tasks_claim_idx (queue, run_at) in
//     run_at order (the literal status = 'QUEUED' is what lets SQLite use a
//     partial index; INDEXED BY makes the statement fail rather than scan if
//     an edit ever breaks that) and looks up each task's instance by primary
//     key (CROSS JOIN keeps the task as the outer loop), stopping at limit
//     claimable tasks;
//   - the outer query sorts those few (at most queues × limit) rows.
//
// A plain join of the tasks of all queues, sorted once, has to read and sort
// every ready task first: measured with 37,000 queued tasks it took 120–950 ms
// per claim against 0.5–1.3 ms for this form, with the same result.
// ?4 is store.QueueSleep, whose tasks are claimable while the instance is
// PAUSED (a timer keeps running).
var claimSQL = `SELECT ` + qualify("t", taskColumns) + `
FROM (SELECT DISTINCT value AS queue FROM json_each(?1)) AS qs
CROSS JOIN workflow_tasks AS t ON t.rowid IN (
    SELECT c.rowid FROM workflow_tasks AS c INDEXED BY workflow_tasks_claim_idx
    CROSS JOIN workflow_instances AS i ON i.id = c.instance_id
    WHERE c.status = 'QUEUED' AND c.queue = qs.queue AND c.run_at <= ?2
      AND (i.status = 'RUNNING' OR (c.queue = ?4 AND i.status = 'PAUSED'))
    ORDER BY c.run_at, c.id
    LIMIT ?3
)
ORDER BY t.run_at, t.id
LIMIT ?3`

// LockClaimable returns up to limit QUEUED tasks of queues with run_at <= now
// whose instance is RUNNING (for store.QueueSleep: RUNNING or PAUSED), oldest
// run_at first (then id); [] when none. Call it inside WithTx and claim the
// tasks in the same transaction: no other transaction can claim them before it
// ends (see Locks). Errors: ErrInvalidArgument (limit outside 1–10000, more
// than store.MaxClaimQueues queues).
func (q *querier) LockClaimable(ctx context.Context, queues []string, now time.Time, limit int) ([]*store.Task, error) {
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
	var tasks []*store.Task
	err = q.write(ctx, func(c dbtx) error {
		var err error
		tasks, err = queryTasks(ctx, c, claimSQL, string(list), micros(now), limit, store.QueueSleep)
		return err
	})
	return tasks, err
}

// expiredSQL uses the partial index workflow_tasks_expiry_idx (lease_until).
const expiredSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks
WHERE status = 'LEASED' AND lease_until < ?1
ORDER BY lease_until, id
LIMIT ?2`

// LockExpired returns up to limit LEASED tasks whose lease_until is before
// now, the longest expired first; [] when none. Errors: ErrInvalidArgument
// (limit outside 1–10000).
func (q *querier) LockExpired(ctx context.Context, now time.Time, limit int) ([]*store.Task, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	var tasks []*store.Task
	err := q.write(ctx, func(c dbtx) error {
		var err error
		tasks, err = queryTasks(ctx, c, expiredSQL, micros(now), limit)
		return err
	})
	return tasks, err
}

// cancelOrphansSQL finds the active tasks through the two partial indexes
// (claim for QUEUED, expiry for LEASED), so the sweep never reads finished
// tasks, however many have accumulated, and looks up each one's instance by
// primary key. A QUEUED task of a PAUSED instance stays: it runs on resume.
const cancelOrphansSQL = `UPDATE workflow_tasks SET status = 'CANCELLED', lease = '', updated_at = ?2
WHERE id IN (
    SELECT a.id FROM (
        SELECT id, instance_id FROM workflow_tasks WHERE status = 'QUEUED'
        UNION ALL
        SELECT id, instance_id FROM workflow_tasks WHERE status = 'LEASED'
    ) AS a
    JOIN workflow_instances AS i ON i.id = a.instance_id
    WHERE i.status NOT IN ('RUNNING', 'PAUSED')
    LIMIT ?1
)`

// CancelOrphanTasks marks CANCELLED (lease cleared) up to limit QUEUED or
// LEASED tasks whose instance is neither RUNNING nor PAUSED, and returns how
// many it changed. Errors: ErrInvalidArgument (limit outside 1–10000).
func (q *querier) CancelOrphanTasks(ctx context.Context, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	now := q.timestamp()
	var n int64
	err := q.write(ctx, func(c dbtx) error {
		res, err := c.ExecContext(ctx, cancelOrphansSQL, limit, now)
		if err != nil {
			return interpretError(ctx, err)
		}
		n, err = res.RowsAffected()
		return interpretError(ctx, err)
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// timedOutSQL selects the instances past their deadline. The status and
// deadline terms are spelt exactly as the WHERE clause of the partial index
// workflow_instances_deadline_idx, so SQLite uses it; deadline < ?1 also
// implies its "deadline IS NOT NULL".
const timedOutSQL = `SELECT id FROM workflow_instances INDEXED BY workflow_instances_deadline_idx
WHERE status IN ('RUNNING', 'PAUSED') AND deadline IS NOT NULL AND deadline < ?1
ORDER BY deadline, id
LIMIT ?2`

// timeoutCause is the history cause of TimeOutInstances.
const timeoutCause = "workflow timeout"

// TimeOutInstances moves up to limit RUNNING or PAUSED instances whose
// deadline is before now to TIMED_OUT, the earliest deadline first (then id),
// each with version+1, updated_at = the store clock and a history row (cause
// "workflow timeout"), and returns their ids in that order ([] when none).
// Like BatchUpdateStatus it takes three statements whatever the number, and two
// sweeps cannot pick the same instance (the second runs after the first
// committed). Errors: ErrInvalidArgument (limit outside 1–10000).
func (q *querier) TimeOutInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	updatedAt := q.timestamp()
	var ids []string
	err := q.write(ctx, func(c dbtx) error {
		var err error
		ids, err = queryIDs(ctx, c, timedOutSQL, micros(now), limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		prev, err := priorStates(ctx, c, ids)
		if err != nil {
			return err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx,
			`UPDATE workflow_instances SET status = 'TIMED_OUT', version = version + 1, updated_at = ?2
			WHERE id IN (SELECT value FROM json_each(?1))`,
			string(list), updatedAt); err != nil {
			return interpretError(ctx, err)
		}
		if err := cancelActiveSteps(ctx, c, string(list)); err != nil {
			return err
		}
		return appendHistories(ctx, c, ids, timeoutCause, prev)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Notify does nothing: a SQLite database has one flowd process writing it,
// whose workers the engine wakes in process.
func (q *querier) Notify(ctx context.Context) error { return nil }

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

// queryIDs runs a query that selects one text column; [] when no row.
func queryIDs(ctx context.Context, c dbtx, query string, args ...any) ([]string, error) {
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, interpretError(ctx, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(ctx, err)
	}
	return ids, nil
}

// scanTask reads the taskColumns of one row. Errors are returned as they are
// (sql.ErrNoRows included) for the caller to interpret.
func scanTask(row scanner) (*store.Task, error) {
	var (
		t                          store.Task
		status, input              string
		runAt, createdAt, updated  int64
		leaseUntil, attemptExpires sql.NullInt64
	)
	if err := row.Scan(&t.ID, &t.InstanceID, &t.StepID, &t.Queue, &status, &t.Attempt, &t.MaxAttempts, &runAt,
		&t.Lease, &t.LeaseOwner, &leaseUntil, &attemptExpires, &input, &t.LastError, &createdAt, &updated); err != nil {
		return nil, err
	}
	t.Status = store.TaskStatus(status)
	t.RunAt = fromMicros(runAt)
	t.LeaseUntil = fromNullMicros(leaseUntil)
	t.AttemptDeadline = fromNullMicros(attemptExpires)
	t.Input = json.RawMessage(input)
	t.CreatedAt = fromMicros(createdAt)
	t.UpdatedAt = fromMicros(updated)
	return &t, nil
}

// CommitStep writes c in one write transaction (a savepoint inside WithTx):
// the task's update only while it holds c.Lease, the instance's only at
// c.ExpectedVersion in c.From, then the history row and the new tasks; any
// miss or failure rolls all of it back. See store.EngineQuerier.
func (q *querier) CommitStep(ctx context.Context, c store.StepCommit) (int64, error) {
	vs, err := q.CommitSteps(ctx, []store.StepCommit{c})
	if err != nil {
		return 0, err
	}
	return vs[0], nil
}

// CommitSteps writes the commits in one write transaction (one savepoint
// inside WithTx), in order; any miss or failure rolls all of them back.
func (q *querier) CommitSteps(ctx context.Context, cs []store.StepCommit) ([]int64, error) {
	if len(cs) == 0 {
		return []int64{}, nil
	}
	pcs := make([]*preparedCommit, len(cs))
	for i, c := range cs {
		pc, err := q.prepareCommit(c)
		if err != nil {
			if len(cs) > 1 {
				err = fmt.Errorf("commit %d of %d: %w", i+1, len(cs), err)
			}
			return nil, err
		}
		pcs[i] = pc
	}
	versions := make([]int64, len(cs))
	err := q.write(ctx, func(tx dbtx) error {
		for i, pc := range pcs {
			v, err := pc.write(ctx, tx)
			if err != nil {
				return err
			}
			versions[i] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, pc := range pcs {
		*pc.c.Task = pc.task
		for i, t := range pc.c.Insert {
			*t = pc.rows[i]
		}
	}
	return versions, nil
}

// preparedCommit is a checked StepCommit ready to be written.
type preparedCommit struct {
	c     store.StepCommit
	task  store.Task
	rows  []store.Task
	state string
	now   time.Time
}

func (q *querier) prepareCommit(c store.StepCommit) (*preparedCommit, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	task := *c.Task
	input, err := taskInput(task.Input)
	if err != nil {
		return nil, fmt.Errorf("task %q: %w", task.ID, err)
	}
	task.Input = input
	normaliseTaskTimes(&task)
	state, err := marshalState(c.State)
	if err != nil {
		return nil, err
	}
	now := q.now()
	rows, err := prepareTasks(c.Insert, now)
	if err != nil {
		return nil, err
	}
	task.UpdatedAt = store.Timestamp(now)
	return &preparedCommit{c: c, task: task, rows: rows, state: state, now: now}, nil
}

// write runs the commit's statements in tx and returns the new version.
func (pc *preparedCommit) write(ctx context.Context, tx dbtx) (int64, error) {
	task, c := &pc.task, &pc.c
	res, err := tx.ExecContext(ctx,
		`UPDATE workflow_tasks SET status = ?2, attempt = ?3, max_attempts = ?4, run_at = ?5,
		lease = ?6, lease_owner = ?7, lease_until = ?8, attempt_deadline = ?9,
		input = ?10, last_error = ?11, updated_at = ?12
		WHERE id = ?1 AND instance_id = ?13 AND status = 'LEASED' AND lease = ?14 AND lease_until > ?15`,
		task.ID, string(task.Status), task.Attempt, task.MaxAttempts, micros(task.RunAt),
		task.Lease, task.LeaseOwner, zeroNullMicros(task.LeaseUntil), zeroNullMicros(task.AttemptDeadline),
		string(task.Input), task.LastError, micros(task.UpdatedAt), task.InstanceID, c.Lease, micros(c.Now))
	if err != nil {
		return 0, fmt.Errorf("task %q: %w", task.ID, interpretError(ctx, err))
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, &store.ConflictError{ID: task.InstanceID, Actual: -1,
			Reason: fmt.Sprintf("task %q is no longer leased under this lease, or its lease ended", task.ID)}
	}
	prev, err := priorState(ctx, tx, task.InstanceID)
	if err != nil {
		return 0, err
	}
	var version int64
	err = tx.QueryRowContext(ctx,
		`UPDATE workflow_instances SET state = ?1, status = ?2, version = version + 1, updated_at = ?3
		WHERE id = ?4 AND version = ?5 AND status = ?6
		RETURNING version`,
		pc.state, string(c.Status), micros(pc.now), task.InstanceID, c.ExpectedVersion, string(c.From)).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &store.ConflictError{ID: task.InstanceID, Actual: -1,
			Reason: fmt.Sprintf("workflow %s is no longer %s at version %d", task.InstanceID, c.From, c.ExpectedVersion)}
	}
	if err != nil {
		return 0, interpretError(ctx, err)
	}
	if err := appendHistory(ctx, tx, task.InstanceID, c.Cause, prev); err != nil {
		return 0, err
	}
	return version, insertTasks(ctx, tx, pc.rows)
}

// ClaimTasks locks the claimable tasks, reads their instances, lets decide
// choose the writes and makes them, in one write transaction (a savepoint
// inside WithTx); see store.EngineQuerier. Nothing else writes meanwhile, so
// only a wrong ExpectedVersion makes a write miss.
func (q *querier) ClaimTasks(ctx context.Context, p store.ClaimParams, decide func([]store.Claimable) ([]*store.ClaimWrite, error)) error {
	if decide == nil {
		return fmt.Errorf("%w: nil decide function", store.ErrInvalidArgument)
	}
	var done []claimDone
	err := q.write(ctx, func(c dbtx) error {
		var err error
		done, err = q.claimOn(ctx, c, p, decide)
		return err
	})
	if err != nil {
		return err
	}
	for _, f := range done {
		f.report()
	}
	return nil
}

// claimOn is ClaimTasks on c, inside the write transaction the caller holds;
// the caller reports what it returns once that is committed.
func (q *querier) claimOn(ctx context.Context, c dbtx, p store.ClaimParams, decide func([]store.Claimable) ([]*store.ClaimWrite, error)) ([]claimDone, error) {
	tasks, err := q.on(c).LockClaimable(ctx, p.Queues, p.Now, p.Limit)
	if err != nil {
		return nil, err
	}
	locked := make([]store.Claimable, len(tasks))
	insts := map[string]*workflow.Instance{}
	for i, t := range tasks {
		inst := insts[t.InstanceID]
		if inst == nil {
			if inst, err = getInstance(ctx, c, t.InstanceID); err != nil {
				return nil, err
			}
			insts[t.InstanceID] = inst
		}
		locked[i] = store.Claimable{Task: t, Instance: inst}
	}
	writes, err := decide(locked)
	if err != nil {
		return nil, err
	}
	if err := store.CheckClaimWrites(locked, writes); err != nil {
		return nil, err
	}
	now := q.timestamp()
	var done []claimDone
	for _, w := range writes {
		id := w.Tasks[0].InstanceID
		f, err := claimWrite(ctx, c, w, insts[id], now)
		if err != nil {
			return nil, err
		}
		done = append(done, f)
		if w.SetState && f.written != nil {
			// A later write of the same instance starts from this one.
			insts[id] = f.written
		}
	}
	return done, nil
}

// claimDone is a made or skipped ClaimWrite: report tells the caller once
// the transaction is committed; written is the instance as written.
type claimDone struct {
	report  func()
	written *workflow.Instance
}

// claimWrite makes one ClaimWrite on c; read is its instance as it is now
// in this transaction.
func claimWrite(ctx context.Context, c dbtx, w *store.ClaimWrite, read *workflow.Instance, now int64) (claimDone, error) {
	at := time.UnixMicro(now).UTC()
	var written *workflow.Instance
	skipped := claimDone{report: func() { w.Written, w.Instance = false, nil }}
	if w.SetState {
		if read.Version != w.ExpectedVersion || read.Status != workflow.StatusRunning {
			return skipped, nil
		}
		state, err := marshalState(w.State)
		if err != nil {
			return claimDone{}, err
		}
		prev, err := priorState(ctx, c, read.ID)
		if err != nil {
			return claimDone{}, err
		}
		res, err := c.ExecContext(ctx,
			`UPDATE workflow_instances SET state = ?1, version = version + 1, updated_at = ?2 WHERE id = ?3 AND version = ?4 AND status = 'RUNNING'`,
			state, now, read.ID, w.ExpectedVersion)
		if err != nil {
			return claimDone{}, interpretError(ctx, err)
		}
		// Not reached: read is the instance as this transaction sees it.
		if err := oneRow(res, fmt.Sprintf("claim of workflow %q", read.ID)); err != nil {
			return claimDone{}, err
		}
		if err := appendHistory(ctx, c, read.ID, w.Cause, prev); err != nil {
			return claimDone{}, err
		}
		inst := *read
		inst.State, inst.Version, inst.UpdatedAt = w.State, read.Version+1, at
		written = &inst
	}
	for _, t := range w.Tasks {
		res, err := c.ExecContext(ctx,
			`UPDATE workflow_tasks SET status = 'LEASED', attempt = ?2, lease = ?3, lease_owner = ?4, lease_until = ?5,
			attempt_deadline = ?6, updated_at = ?7
			WHERE id = ?1 AND status = 'QUEUED'`,
			t.ID, t.Attempt, t.Lease, t.LeaseOwner, micros(t.LeaseUntil), zeroNullMicros(t.AttemptDeadline), now)
		if err != nil {
			return claimDone{}, fmt.Errorf("task %q: %w", t.ID, interpretError(ctx, err))
		}
		if err := oneRow(res, fmt.Sprintf("claim of task %q", t.ID)); err != nil {
			return claimDone{}, err
		}
	}
	return claimDone{written: written, report: func() {
		for _, t := range w.Tasks {
			t.LeaseUntil = store.Timestamp(t.LeaseUntil)
			if !t.AttemptDeadline.IsZero() {
				t.AttemptDeadline = store.Timestamp(t.AttemptDeadline)
			}
			t.UpdatedAt = at
		}
		w.Written, w.Instance = true, written
	}}, nil
}

// CommitGroup writes creates and commits and then makes the claim, in one
// write transaction (one savepoint inside WithTx), in order; any failure
// rolls all of it back. The creates' tasks and the claim's writes are
// filled in only when all of it is written. Nothing else writes meanwhile,
// so the claim's instances need no lock of their own.
func (q *querier) CommitGroup(ctx context.Context, creates []store.CreateParams, commits []store.StepCommit, claim *store.GroupClaim) ([]*workflow.Instance, []int64, error) {
	if err := claim.Check(); err != nil {
		return nil, nil, err
	}
	insts := make([]*workflow.Instance, len(creates))
	var claimed []claimDone
	var versions []int64
	// Each create fills in copies of its tasks.
	copies := make([][]*store.Task, len(creates))
	for i := range creates {
		for _, t := range creates[i].Tasks {
			if t == nil {
				return nil, nil, fmt.Errorf("%w: nil task", store.ErrInvalidArgument)
			}
			c := *t
			copies[i] = append(copies[i], &c)
		}
	}
	err := q.write(ctx, func(c dbtx) error {
		tq := q.on(c)
		for i, p := range creates {
			p.Tasks = copies[i]
			inst, err := tq.Create(ctx, p)
			if err != nil {
				return fmt.Errorf("create %d of %d: %w", i+1, len(creates)+len(commits), err)
			}
			insts[i] = inst
		}
		var err error
		if versions, err = tq.CommitSteps(ctx, commits); err != nil || claim == nil {
			return err
		}
		claimed, err = q.claimOn(ctx, c, claim.Params, claim.Decide)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range creates {
		for j, t := range creates[i].Tasks {
			*t = *copies[i][j]
		}
	}
	for _, f := range claimed {
		f.report()
	}
	return insts, versions, nil
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
