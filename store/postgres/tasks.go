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

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The engine's operations (store.TaskQuerier). Locks are taken in one order everywhere: a task row first,
// then its instance; every query that would lock against that order uses
// SKIP LOCKED, and the claim query never locks the instance at all.

var (
	_ store.TaskQuerier = (*querier)(nil)
	_ store.TaskQuerier = (*Store)(nil)
)

// newTasks1 is the row source of new tasks: the arrays of prepareTasks
// (taskColumnArrays.args) as parameters $1–$14, unnested into rows x, with
// the iterations and the flow control (taskColumnArrays.tail) as the
// tailParams parameters from tail on — the last of the statement, added
// after the others were numbered. newTasks11 is the same from $11 on.
func newTasks1(tail int) string {
	return `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::int4[],
		$8::timestamptz[], $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[], $13::text[], $14::text[], ` + tailUnnest(tail) + `)
		AS x (` + newTaskColumns + `, ` + tailColumns + `)`
}

func newTasks11(tail int) string {
	return `unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::int4[], $17::int4[],
		$18::timestamptz[], $19::text[], $20::text[], $21::timestamptz[], $22::timestamptz[], $23::text[], $24::text[], ` + tailUnnest(tail) + `)
		AS x (` + newTaskColumns + `, ` + tailColumns + `)`
}

// tailColumns are the columns of the parameters of taskColumnArrays.tail,
// tailParams of them.
const (
	tailColumns = `iteration, priority, concurrency_key, concurrency_limit, rate_key, rate_per_second, rate_burst, held, attempt_timeout_us`
	tailParams  = 9
)

func tailUnnest(first int) string {
	return fmt.Sprintf(`$%d::int4[], $%d::int2[], $%d::text[], $%d::int4[], $%d::text[], $%d::float8[], $%d::int4[], $%d::boolean[], $%d::int8[]`,
		first, first+1, first+2, first+3, first+4, first+5, first+6, first+7, first+8)
}

const (
	newTaskColumns = `id, instance_id, step_id, queue, status, attempt, max_attempts,
			run_at, lease, lease_owner, lease_until, attempt_deadline, input, last_error`
	// insertTasksPrefix inserts rows of x; created_at and updated_at follow.
	insertTasksPrefix = `INSERT INTO workflow_tasks (` + newTaskColumns + `, ` + tailColumns + `, created_at, updated_at)
	SELECT id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
		lease, lease_owner, lease_until, attempt_deadline, input::jsonb, last_error, ` + tailColumns + `, `
)

// taskColumns is the column list scanTask reads, in its order.
const taskColumns = `id, instance_id, step_id, queue, status, attempt, max_attempts, run_at,
	lease, lease_owner, lease_until, attempt_deadline, input, last_error, created_at, updated_at, iteration,
	priority, concurrency_key, concurrency_limit, rate_key, rate_per_second, rate_burst, held, attempt_timeout_us, output`

const (
	getTaskSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks WHERE id = $1`

	// Step ids are ordered bytewise (COLLATE "C"), as SQLite and Go do,
	// whatever the database's default collation.
	tasksOfInstanceSQL = `SELECT ` + taskColumns + ` FROM workflow_tasks WHERE instance_id = $1 ORDER BY step_id COLLATE "C", iteration`
)

// The reads of Due, one per store.DueKind: plain reads, no row locks (the
// engine's writes guard on what they read).
var (
	// dueTimeoutsSQL is served by the partial deadline index (deadline <
	// $1 implies deadline IS NOT NULL).
	dueTimeoutsSQL = `SELECT ` + instanceColumns + ` FROM workflow_instances
WHERE status IN ('RUNNING', 'PAUSED') AND deadline < $1
ORDER BY deadline, id COLLATE "C"
LIMIT $2`

	// dueAbandonedSQL reads the child workflows that still run through
	// their partial index (migration 00018) and looks up each one's
	// parent by primary key.
	dueAbandonedSQL = `SELECT ` + instanceColumnsOf("c") + `
FROM workflow_instances c JOIN workflow_instances p ON p.id = c.parent_id
WHERE c.parent_id IS NOT NULL AND c.status IN ('PENDING', 'QUEUED', 'RUNNING', 'PAUSED')
	AND p.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
LIMIT $1`

	// dueLeasesSQL is served by the partial expiry index.
	dueLeasesSQL = `SELECT ` + taskPrefixedColumns + claimInstanceColumns + `
FROM workflow_tasks t JOIN workflow_instances i ON i.id = t.instance_id
WHERE t.status = 'LEASED' AND t.lease_until < $1
ORDER BY t.lease_until, t.id COLLATE "C"
LIMIT $2`
)

// taskPrefixedColumns is taskColumns qualified with the alias t.
const taskPrefixedColumns = `t.id, t.instance_id, t.step_id, t.queue, t.status, t.attempt, t.max_attempts, t.run_at,
	t.lease, t.lease_owner, t.lease_until, t.attempt_deadline, t.input, t.last_error, t.created_at, t.updated_at, t.iteration,
	t.priority, t.concurrency_key, t.concurrency_limit, t.rate_key, t.rate_per_second, t.rate_burst, t.held, t.attempt_timeout_us, t.output`

// claimSQL returns the claim query for n queues ($2 … $n+1) due by $1, at
// most limit tasks: the engine's hot path. It must cost the same whatever
// the backlog: one ordered index scan per queue, stopped after limit rows,
// not a sort of every due task. A single scan with queue = ANY (…) cannot
// return rows in run_at order across several queues (PostgreSQL would read
// and sort all the due tasks of every queue asked for: about a second per
// claim with 200,000 queued tasks), so the LATERAL subquery walks the
// partial claim index (status = 'QUEUED' matches its predicate; its
// columns are queue, priority, run_at and id COLLATE "C", the whole
// delivery order, so that no sort is needed, even among the many tasks a
// backlog started at once shares one run_at with) once per queue and
// priority (1–5, each an equality, so that run_at <= $1 bounds the range
// and the scan stops after limit rows or the last due task, never walking
// a priority's future timers), in delivery order, each instance found through
// its primary key; the outer query merges them and keeps the limit tasks
// of highest priority, oldest first. The highest priority queued in each
// queue is read first (one descent of the index, backwards; OFFSET 0 keeps
// it to one per queue), and only the priorities up to it are probed: a
// queue without queued tasks (the engine's own queues are empty most of
// the time) costs that descent alone, and one whose tasks all have the
// default priority three probes, not five. A task is claimable when it
// is not held (store.Task.Held: the engine decided, when it wrote the
// instance's status, that the status holds it); the instance is joined
// only to be returned with its tasks (claimWithInstancesSQL).
//
// FOR UPDATE OF t locks task rows only, never the instance (a claim writes
// no instance, and must not wait for one being modified); SKIP LOCKED makes concurrent claimers take different tasks,
// and PostgreSQL applies the inner LIMIT to the rows it locked, so a
// claimer is never starved by rows others hold. The price: with several
// queues or priorities up to limit tasks per queue and priority are
// locked, and those that the outer
// LIMIT drops stay locked (unclaimed) until the caller's transaction ends.
// The queues must be distinct (claimArgs sees to it): the
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
func claimSQL(queues, limit int) string { return claimQuery(queues, limit, "") }

// claimWithInstancesSQL is claimSQL that also returns each task's instance
// (the columns of instanceColumns, read, not locked), for ClaimTasks and
// a store.GroupClaim.
func claimWithInstancesSQL(queues, limit int) string {
	return claimQuery(queues, limit, claimInstanceColumns)
}

var claimInstanceColumns = `,
		i.id AS i_id, i.definition AS i_definition, i.status AS i_status, ` + stateOf("i") + ` AS i_state, i.input AS i_input,
		i.version AS i_version, i.created_at AS i_created_at, i.updated_at AS i_updated_at,
		i.definition_revision AS i_definition_revision, i.deadline AS i_deadline,
		i.parent_id AS i_parent_id, i.parent_step AS i_parent_step, i.parent_index AS i_parent_index, i.traceparent AS i_traceparent, i.priority AS i_priority, i.rerun_of AS i_rerun_of`

func claimQuery(queues, limit int, extra string) string {
	join := ""
	if extra != "" {
		join = " JOIN workflow_instances i ON i.id = t.instance_id"
	}
	var qs, ps strings.Builder
	for i := range queues {
		if i > 0 {
			qs.WriteString(", ")
		}
		fmt.Fprintf(&qs, "($%d::text)", i+2)
	}
	for p := workflow.MaxPriority; p >= workflow.MinPriority; p-- {
		if p < workflow.MaxPriority {
			ps.WriteString(", ")
		}
		fmt.Fprintf(&ps, "(%d::smallint)", p)
	}
	return fmt.Sprintf(`SELECT c.* FROM (
	SELECT q.queue, (SELECT e.priority FROM workflow_tasks e WHERE e.status = 'QUEUED' AND e.queue = q.queue
		ORDER BY e.priority DESC LIMIT 1) AS top
	FROM (VALUES %[1]s) AS q (queue)
	OFFSET 0
) q
JOIN (VALUES %[2]s) AS p (priority) ON p.priority <= q.top
CROSS JOIN LATERAL (
	SELECT `+taskPrefixedColumns+extra+`
	FROM workflow_tasks t`+join+`
	WHERE t.status = 'QUEUED' AND t.queue = q.queue AND t.priority = p.priority AND t.run_at <= $1
		AND NOT t.held`+claimFlowFilter+`
	ORDER BY t.run_at, t.id COLLATE "C"
	LIMIT %[3]d
	FOR UPDATE OF t SKIP LOCKED
) c
ORDER BY c.priority DESC, c.run_at, c.id COLLATE "C"
LIMIT %[3]d`, qs.String(), ps.String(), limit)
}

// claimFlowFilter leaves out, without locking anything, the tasks whose
// concurrency key is at its limit (its row of LEASED counts) or whose
// bucket's next token is not due yet, as last committed, so that they do
// not take the claim's places ahead of tasks that can go. It only
// narrows, with plain comparisons: the exact check is the claim's
// (gateFlow), guarded where it writes. A task without keys never runs the
// subqueries.
const claimFlowFilter = `
		AND (t.concurrency_key IS NULL OR NOT EXISTS (SELECT 1 FROM task_concurrency l
			WHERE l.key = t.concurrency_key AND l.leased >= t.concurrency_limit))
		AND (t.rate_key IS NULL OR NOT EXISTS (SELECT 1 FROM flowd_rate_buckets b WHERE b.key = t.rate_key
			AND b.next_token_at > $1))`

// prepareTasks checks new tasks and completes copies of them as they will be
// stored (ID, status, input, times), and returns those and the columns of
// the unnest parameters ($1–$14 of createSQL and applySQL).
func prepareTasks(tasks []*store.Task, now time.Time) ([]store.Task, *taskColumnArrays, error) {
	n := len(tasks)
	// Everything is checked, on copies, before anything is sent; the
	// caller's tasks are completed only once they are stored.
	rows := make([]store.Task, n)
	seenID := make(map[string]bool, n)
	seenStep := make(map[taskKey]bool, n)
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
		step := taskKey{r.InstanceID, r.StepID, r.Iteration}
		if seenStep[step] {
			return nil, nil, fmt.Errorf("task for workflow %q step %q iteration %d: %w", r.InstanceID, r.StepID, r.Iteration, store.ErrExists)
		}
		seenID[r.ID], seenStep[step] = true, true
		normaliseTaskTimes(&r)
		if err := store.NormaliseNewTask(&r); err != nil {
			return nil, nil, err
		}
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
		iterations: make([]int32, n), priorities: make([]int16, n), concurrencyKeys: make([]*string, n),
		concurrencyLimits: make([]int32, n), rateKeys: make([]*string, n), ratePerSecond: make([]float64, n),
		rateBursts: make([]int32, n), helds: make([]bool, n), attemptTimeouts: make([]int64, n),
	}
	for i, r := range rows {
		c.ids[i], c.instances[i], c.steps[i], c.queues[i], c.statuses[i] = r.ID, r.InstanceID, r.StepID, r.Queue, string(r.Status)
		c.attempts[i], c.maxAttempts[i], c.iterations[i] = int32(r.Attempt), int32(r.MaxAttempts), int32(r.Iteration)
		c.runAt[i], c.helds[i], c.attemptTimeouts[i] = r.RunAt, r.Held, r.AttemptTimeout.Microseconds()
		c.leases[i], c.owners[i], c.inputs[i], c.lastErrors[i] = r.Lease, r.LeaseOwner, string(r.Input), r.LastError
		c.leaseUntil[i], c.attemptDeadline[i] = nullTime(r.LeaseUntil), nullTime(r.AttemptDeadline)
		f := r.Flow
		c.priorities[i], c.concurrencyLimits[i], c.ratePerSecond[i], c.rateBursts[i] = int16(f.Priority), int32(f.ConcurrencyLimit), f.RatePerSecond, int32(f.RateBurst)
		if f.ConcurrencyLimit > 0 {
			c.concurrencyKeys[i] = &f.ConcurrencyKey
		}
		if f.RatePerSecond > 0 {
			c.rateKeys[i] = &f.RateKey
		}
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
	// iterations and the flow control are parameters of their own (see
	// newTasks1 and tail), not of args.
	iterations        []int32
	priorities        []int16
	concurrencyKeys   []*string
	concurrencyLimits []int32
	rateKeys          []*string
	ratePerSecond     []float64
	rateBursts        []int32
	helds             []bool
	attemptTimeouts   []int64 // microseconds
}

// tail returns the arrays of the tailColumns, in their order.
func (c *taskColumnArrays) tail() []any {
	return []any{c.iterations, c.priorities, c.concurrencyKeys, c.concurrencyLimits, c.rateKeys, c.ratePerSecond, c.rateBursts, c.helds, c.attemptTimeouts}
}

// taskKey is what makes a task row unique besides its id.
type taskKey struct {
	instance, step string
	iteration      int
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
	if t.Iteration < 0 || t.Iteration > math.MaxInt32 {
		return fmt.Errorf("%w: task %q: iteration %d is out of range", store.ErrInvalidArgument, t.ID, t.Iteration)
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

// Task returns the task: a plain read, also inside a transaction.
// ErrNotFound for an unknown id.
func (q *querier) Task(ctx context.Context, id string) (*store.Task, error) {
	if !storableText(id) {
		return nil, taskNotFound(id)
	}
	t, err := scanTask(q.db.QueryRow(ctx, getTaskSQL, id))
	if err != nil {
		return nil, interpretTaskError(err, id)
	}
	return t, nil
}

// TasksOfInstance returns the instance's tasks ordered by step id ([] for
// an instance without tasks, or unknown).
func (q *querier) TasksOfInstance(ctx context.Context, instanceID string) ([]*store.Task, error) {
	if !storableText(instanceID) {
		return []*store.Task{}, nil
	}
	return q.queryTasks(ctx, tasksOfInstanceSQL, instanceID)
}

// claimArgs checks a claim's parameters and returns how many distinct
// queues it names (0: nothing to claim) and the claim query's arguments.
func claimArgs(p store.ClaimParams) (int, []any, error) {
	if err := p.Check(); err != nil {
		return 0, nil, err
	}
	if err := checkText("the lease owner", p.Owner); err != nil {
		return 0, nil, err
	}
	args := make([]any, 1, 1+len(p.Queues))
	args[0] = store.Timestamp(p.Now)
	for _, queue := range p.Queues {
		if err := checkText("queue", queue); err != nil {
			return 0, nil, err
		}
		if !slices.Contains(args[1:], any(queue)) {
			args = append(args, queue)
		}
	}
	return len(args) - 1, args, nil
}

// Due reads up to p.Limit items of due work; see store.TaskQuerier.
func (q *querier) Due(ctx context.Context, p store.DueParams) ([]store.DueItem, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if items, ok, err := q.dueReads().Read(ctx, p); ok {
		return items, err
	}
	if p.Kind == store.DueTimeouts || p.Kind == store.DueAbandoned {
		sql, args := dueTimeoutsSQL, []any{store.Timestamp(p.Now), p.Limit}
		if p.Kind == store.DueAbandoned {
			sql, args = dueAbandonedSQL, []any{p.Limit}
		}
		rows, err := q.db.Query(ctx, sql, args...)
		if err != nil {
			return nil, interpretError(err, "")
		}
		insts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*workflow.Instance, error) { return scanInstance(row) })
		if err != nil {
			return nil, interpretError(err, "")
		}
		items := make([]store.DueItem, len(insts))
		for i, inst := range insts {
			items[i].Instance = inst
		}
		return items, nil
	}
	sql, args := dueLeasesSQL, []any{store.Timestamp(p.Now), p.Limit}
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, interpretError(err, "")
	}
	cs, err := scanClaimables(rows)
	if err != nil {
		return nil, err
	}
	items := make([]store.DueItem, len(cs))
	for i, c := range cs {
		items[i] = store.DueItem{Instance: c.Instance, Task: c.Task}
	}
	return items, nil
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
		attempt, maxAttempts, iter  int32
		leaseUntil, attemptDeadline *time.Time
		input, output               []byte
		priority                    int16
		concurrencyKey, rateKey     *string
		concurrencyLimit, rateBurst int32
		attemptTimeout              int64
	)
	if err := row.Scan(&t.ID, &t.InstanceID, &t.StepID, &t.Queue, &status, &attempt, &maxAttempts, &t.RunAt,
		&t.Lease, &t.LeaseOwner, &leaseUntil, &attemptDeadline, &input, &t.LastError, &t.CreatedAt, &t.UpdatedAt, &iter,
		&priority, &concurrencyKey, &concurrencyLimit, &rateKey, &t.Flow.RatePerSecond, &rateBurst, &t.Held, &attemptTimeout, &output); err != nil {
		return nil, err
	}
	t.Flow.Priority, t.Flow.ConcurrencyLimit, t.Flow.RateBurst = int(priority), int(concurrencyLimit), int(rateBurst)
	if concurrencyKey != nil {
		t.Flow.ConcurrencyKey = *concurrencyKey
	}
	if rateKey != nil {
		t.Flow.RateKey = *rateKey
	}
	t.Status = store.TaskStatus(status)
	t.Attempt, t.MaxAttempts, t.Iteration = int(attempt), int(maxAttempts), int(iter)
	t.AttemptTimeout = time.Duration(attemptTimeout) * time.Microsecond
	t.RunAt = t.RunAt.UTC()
	if leaseUntil != nil {
		t.LeaseUntil = leaseUntil.UTC()
	}
	if attemptDeadline != nil {
		t.AttemptDeadline = attemptDeadline.UTC()
	}
	t.Input = compactJSON(input)
	if output != nil {
		t.Output = compactJSON(output)
	}
	t.CreatedAt = t.CreatedAt.UTC()
	t.UpdatedAt = t.UpdatedAt.UTC()
	return &t, nil
}

// CountInstances reads the counts p asks for (see store.Counter).
func (s *Store) CountInstances(ctx context.Context, p store.CountParams) (store.InstanceCounts, error) {
	return store.CountReads{
		ByStatus: func(ctx context.Context) (map[string]int64, error) {
			return s.countGrouped(ctx, `SELECT status, count(*) FROM workflow_instances GROUP BY status`)
		},
		Queued: func(ctx context.Context) (map[string]int64, error) {
			return s.countGrouped(ctx, `SELECT definition, count(*) FROM workflow_instances
			WHERE status = 'QUEUED' AND concurrency_key IS NOT NULL GROUP BY definition`)
		},
	}.Count(ctx, p)
}

// countGrouped runs query, whose rows are (group, count), into a map.
func (s *Store) countGrouped(ctx context.Context, query string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, query)
	if err != nil {
		return nil, interpretError(err, "")
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var (
			group string
			n     int64
		)
		if err := rows.Scan(&group, &n); err != nil {
			return nil, interpretError(err, "")
		}
		counts[group] = n
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, "")
	}
	return counts, nil
}

var _ store.Counter = (*Store)(nil)
