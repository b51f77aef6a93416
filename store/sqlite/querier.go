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

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// dbtx is what the queries need: a pool or a transaction, their statements
// prepared once (cachedDB, cachedTx).
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// querier implements store.Querier once for both ways it is used:
//   - on the Store, read is the read pool and write starts a BEGIN IMMEDIATE
//     transaction on the write pool for each method;
//   - inside the store's own transactions (inTx), read is the transaction and write runs in a savepoint of
//     it, so nothing ever leaves the transaction's connection (a read on the
//     pool while this goroutine holds the single write connection could wait
//     for ever in memory mode, and would not see the transaction's writes).
//
// A method that changes an instance reads what it needs and writes inside the
// one write function call, so the read and the write see the same snapshot:
// SQLite has one writer at a time, and the write lock is held from BEGIN.
type querier struct {
	read  dbtx
	write func(ctx context.Context, fn func(c dbtx) error) error
	now   func() time.Time
}

// headerColumns is the column list an instance's INSERT or UPDATE returns,
// in the order scanInstance reads them: its state is the stored header
// (store.StepRecords), which the writer replaces with the state it wrote.
const headerColumns = `id, definition, status, state, input, version, created_at, updated_at, definition_revision, deadline, output, parent_id, parent_step, parent_index, traceparent, priority, rerun_of`

// instanceColumns is the column list every instance query selects, in the
// order scanInstance reads them, of the one instance row of its FROM (its
// columns named unqualified).
var instanceColumns = instanceColumnsOf("")

// instanceColumnsOf is instanceColumns of the instance row alias: its
// state assembled (stateOf).
func instanceColumnsOf(alias string) string {
	cols := headerColumns
	if alias != "" {
		cols = qualify(alias, cols)
		alias += "."
	}
	return strings.Replace(cols, alias+"state", stateOf(strings.TrimSuffix(alias, ".")), 1)
}

// stateOf is the state of the instance row alias (unqualified columns for
// ""), assembled from the row's header and its steps' records. The record
// table has no column named like the instance's, so unqualified names
// inside it are the instance row's. json() marks the subquery's text as
// JSON, which a subquery's result no longer is.
func stateOf(alias string) string {
	a := ""
	if alias != "" {
		a = alias + "."
	}
	return "json_set(" + a + "state, '$.steps', json((SELECT json_group_object(r.step_id, json(r.record)) FROM workflow_steps r WHERE r.instance_id = " + a + "id)))"
}

// Create inserts a new instance at version 0 with its history row 0.
func (q *querier) Create(ctx context.Context, p store.CreateParams) (*workflow.Instance, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	state, err := marshalState(p.State)
	if err != nil {
		return nil, err
	}
	records, err := store.SplitState(nil, p.State, nil)
	if err != nil {
		return nil, err
	}
	var input bytes.Buffer
	if err := json.Compact(&input, p.Input); err != nil {
		return nil, fmt.Errorf("%w: input: %w", store.ErrInvalidArgument, err)
	}
	tasks, err := prepareTasks(p.Tasks, q.now())
	if err != nil {
		return nil, err
	}
	now := q.timestamp()
	search := store.SearchRows(p.Search)
	var inst *workflow.Instance
	err = q.write(ctx, func(c dbtx) error {
		if err := checkRevision(ctx, c, p); err != nil {
			return err
		}
		if p.IdempotencyKey != "" {
			if err := checkIdempotencyKey(ctx, c, p, now); err != nil {
				return err
			}
		}
		var err error
		inst, err = scanInstance(c.QueryRowContext(ctx,
			`INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at, definition_revision, deadline, parent_id, parent_step, parent_index, traceparent, concurrency_key, concurrency_limit, priority, rerun_of)
			VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
			RETURNING `+headerColumns,
			append(append(append([]any{p.ID, p.Definition, string(p.Status), string(records.Header), input.String(), now, p.DefinitionRevision, nullMicros(p.Deadline)}, append(parentArgs(p.Parent), nullText(p.TraceParent))...), concurrencyArgs(p.Concurrency)...), p.Priority, nullText(p.RerunOf))...))
		if err != nil {
			err = interpretError(ctx, err)
			if errors.Is(err, store.ErrExists) {
				return fmt.Errorf("workflow %q: %w", p.ID, store.ErrExists)
			}
			return err
		}
		if inst.State, err = decodeStored(p.ID, state); err != nil {
			return err
		}
		if err := putStepRecords(ctx, c, p.ID, records); err != nil {
			return err
		}
		if err := putSearch(ctx, c, p.ID, search); err != nil {
			return err
		}
		if err := appendHistory(ctx, c, p.ID, 0, p.Status, len(state), jsondelta.Whole([]byte(state)), now, p.Cause, store.WriteActor(ctx, p.Actor), nil); err != nil {
			return err
		}
		if err := applySlot(ctx, c, p.ID, createdSlot(p), p.SlotChange(), true); err != nil {
			return err
		}
		if err := countDescendant(ctx, c, p.Descendant); err != nil {
			return err
		}
		if p.IdempotencyKey != "" {
			if err := recordIdempotencyKey(ctx, c, p, now); err != nil {
				return err
			}
		}
		return insertTasks(ctx, c, tasks)
	})
	if err != nil {
		return nil, err
	}
	for i, t := range p.Tasks {
		*t = tasks[i]
	}
	inst.Search = store.SearchOf(search)
	return inst, nil
}

// Get returns the instance as stored, or ErrNotFound.
func (q *querier) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	var (
		r      instanceScan
		search *string
	)
	err := q.read.QueryRowContext(ctx, getStoredSQL, id).Scan(append(r.dest(), &search)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.NotFound(id)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	inst, err := r.instance()
	if err != nil {
		return nil, err
	}
	if inst.Search, err = decodeSearch(search); err != nil {
		return nil, err
	}
	return inst, nil
}

// GetWithAttemptsInFlight returns the instance with the attempts its
// leased tasks run, or ErrNotFound.
func (q *querier) GetWithAttemptsInFlight(ctx context.Context, id string) (*workflow.Instance, error) {
	var (
		r        instanceScan
		inFlight sql.NullString
		search   *string
	)
	err := q.read.QueryRowContext(ctx, getSQL, id).Scan(append(r.dest(), &inFlight, &search)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.NotFound(id)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	inst, err := r.instance()
	if err != nil {
		return nil, err
	}
	if inst.Search, err = decodeSearch(search); err != nil {
		return nil, err
	}
	if inFlight.Valid {
		attempts := map[string]int{}
		if err := json.Unmarshal([]byte(inFlight.String), &attempts); err != nil {
			return nil, fmt.Errorf("sqlite: the attempts in flight of workflow %q: %w", id, err)
		}
		store.ShowAttemptsInFlight(&inst.State, attempts)
	}
	return inst, nil
}

// getStoredSQL reads the instance as stored, with its search attributes
// (Get).
var getStoredSQL = `SELECT ` + instanceColumnsOf("i") + `, ` + searchOf("i") + ` FROM workflow_instances i WHERE i.id = ?1`

// getSQL reads the instance with the attempts its leased tasks run
// (store.ShowAttemptsInFlight) as a JSON object, NULL when none, through
// the partial index of leased tasks of steps without foreach.
var getSQL = `SELECT ` + instanceColumnsOf("i") + `,
	(SELECT json_group_object(step_id, attempt) FROM workflow_tasks
		WHERE instance_id = ?1 AND status = 'LEASED' AND iteration = 0 HAVING count(*) > 0),
	` + searchOf("i") + `
FROM workflow_instances i WHERE i.id = ?1`

// List returns one page of instances, newest first, with keyset pagination on
// (created_at, id). With search filters the first one (by name) drives the
// query: its rows of workflow_search are read from their index in the
// list's order, from the cursor on, and joined with their instances; the
// other filters are checked on each.
func (q *querier) List(ctx context.Context, p store.ListParams) (store.ListPage, error) {
	if err := p.Normalize(); err != nil {
		return store.ListPage{}, err
	}
	query, args, err := listSQL(p)
	if err != nil {
		return store.ListPage{}, err
	}
	rows, err := q.read.QueryContext(ctx, query, args...)
	if err != nil {
		return store.ListPage{}, interpretError(ctx, err)
	}
	defer rows.Close()
	page := store.ListPage{Instances: []*workflow.Instance{}}
	for rows.Next() {
		var (
			r      instanceScan
			search *string
		)
		if err := rows.Scan(append(r.dest(), &search)...); err != nil {
			return store.ListPage{}, interpretError(ctx, err)
		}
		inst, err := r.instance()
		if err != nil {
			return store.ListPage{}, err
		}
		if inst.Search, err = decodeSearch(search); err != nil {
			return store.ListPage{}, err
		}
		page.Instances = append(page.Instances, inst)
	}
	if err := rows.Err(); err != nil {
		return store.ListPage{}, interpretError(ctx, err)
	}
	if len(page.Instances) > p.Limit {
		page.Instances = page.Instances[:p.Limit]
		last := page.Instances[p.Limit-1]
		page.NextCursor = store.EncodeCursor(store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// listSQL is List's statement for p (normalised) and its arguments.
func listSQL(p store.ListParams) (query string, args []any, err error) {
	// The WHERE clause is assembled from fixed fragments; every value is a
	// bound parameter.
	var where []string
	filters := p.SearchFilters()
	// created and id are the columns of the list's order: the driving
	// search row's copy of them, or the instance's own.
	from, created, id := "workflow_instances i", "i.created_at", "i.id"
	if len(filters) > 0 {
		from, created, id = "workflow_search s0 JOIN workflow_instances i ON i.id = s0.instance_id", "s0.created_at", "s0.instance_id"
		where = append(where, "s0.name = ?", "s0.value = ?")
		args = append(args, filters[0].Name, filters[0].Value)
		for _, f := range filters[1:] {
			where = append(where, "EXISTS (SELECT 1 FROM workflow_search sk WHERE sk.instance_id = i.id AND sk.name = ? AND sk.value = ?)")
			args = append(args, f.Name, f.Value)
		}
	}
	if p.Cursor != "" {
		cur, err := store.DecodeCursor(p.Cursor)
		if err != nil {
			return "", nil, err
		}
		where = append(where, "("+created+", "+id+") < (?, ?)")
		args = append(args, micros(cur.CreatedAt), cur.ID)
	}
	if p.Status != "" {
		where = append(where, "i.status = ?")
		args = append(args, string(p.Status))
	}
	if p.Definition != "" {
		where = append(where, "i.definition = ?")
		args = append(args, p.Definition)
	}
	if p.Parent != "" {
		where = append(where, "i.parent_id = ?")
		args = append(args, p.Parent)
	}
	if p.RerunOf != "" {
		where = append(where, "i.rerun_of = ?")
		args = append(args, p.RerunOf)
	}
	if p.IDPrefix != "" {
		// A range on the primary key, compared bytewise (BINARY), rather
		// than LIKE, whose "_" is a wildcard and which ignores ASCII case
		// here. Ids are ASCII below 0x7f, so every id that starts with the
		// prefix sorts below prefix+"\x7f", and no other id between them.
		where = append(where, "i.id >= ? AND i.id < ?")
		args = append(args, p.IDPrefix, p.IDPrefix+"\x7f")
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, created+" > ?")
		args = append(args, micros(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, created+" < ?")
		args = append(args, micros(p.CreatedBefore))
	}
	if !p.UpdatedBefore.IsZero() {
		where = append(where, "i.updated_at < ?")
		args = append(args, micros(p.UpdatedBefore))
	}
	query = "SELECT " + instanceColumnsOf("i") + ", " + searchOf("i") + " FROM " + from
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	// One row more than asked tells whether there is a next page.
	query += " ORDER BY " + created + " DESC, " + id + " DESC LIMIT ?"
	args = append(args, p.Limit+1)

	return query, args, nil
}

// timestamp is the time of a write, as stored: unix microseconds of the
// injected clock, the precision of store.Timestamp.
func (q *querier) timestamp() int64 { return micros(q.now()) }

func micros(t time.Time) int64 { return store.Timestamp(t).UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros stores an optional time: nil is NULL.
func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return micros(*t)
}

// zeroNullMicros stores a time whose zero value means "none" as NULL.
func zeroNullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}

// fromNullMicros reads a nullable time column; NULL is the zero time.
func fromNullMicros(us sql.NullInt64) time.Time {
	if !us.Valid {
		return time.Time{}
	}
	return fromMicros(us.Int64)
}

// getInstance reads one instance on c (the read pool or a transaction).
func getInstance(ctx context.Context, c dbtx, id string) (*workflow.Instance, error) {
	inst, err := scanInstance(c.QueryRowContext(ctx,
		`SELECT `+instanceColumns+` FROM workflow_instances WHERE id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.NotFound(id)
	}
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	return inst, nil
}

// currentStatus reads the status and version of an instance, to explain why a
// conditional write matched no row.
func currentStatus(ctx context.Context, c dbtx, id string) (workflow.Status, int64, error) {
	var (
		status  string
		version int64
	)
	err := c.QueryRowContext(ctx, `SELECT status, version FROM workflow_instances WHERE id = ?1`, id).Scan(&status, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, store.NotFound(id)
	}
	if err != nil {
		return "", 0, interpretError(ctx, err)
	}
	return workflow.Status(status), version, nil
}

// marshalState encodes a state for storage. It fails only for a value that is
// not valid JSON (a json.RawMessage set by hand), which makes the state
// invalid.
func marshalState(s workflow.State) (string, error) {
	return storableState(s.MarshalJSON()) // not json.Marshal: that re-validates the output
}

func storableState(b []byte, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("%w: %w", workflow.ErrInvalidState, err)
	}
	return string(b), nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanInstance reads the instanceColumns of one row. Errors are returned as
// they are (sql.ErrNoRows included) for the caller to interpret.
func scanInstance(row scanner) (*workflow.Instance, error) {
	var r instanceScan
	if err := row.Scan(r.dest()...); err != nil {
		return nil, err
	}
	return r.instance()
}

// instanceScan receives the instanceColumns of a row.
type instanceScan struct {
	inst                 workflow.Instance
	status, state, input string
	createdAt, updatedAt int64
	deadline             sql.NullInt64
	output               sql.NullString
	parent               parentColumns
	traceParent          sql.NullString
	rerunOf              sql.NullString
}

func (r *instanceScan) dest() []any {
	return []any{&r.inst.ID, &r.inst.Definition, &r.status, &r.state, &r.input, &r.inst.Version, &r.createdAt, &r.updatedAt,
		&r.inst.DefinitionRevision, &r.deadline, &r.output, &r.parent.id, &r.parent.step, &r.parent.index, &r.traceParent, &r.inst.Priority, &r.rerunOf}
}

// instance decodes what was scanned.
func (r *instanceScan) instance() (*workflow.Instance, error) {
	inst := r.inst
	if r.deadline.Valid {
		d := fromMicros(r.deadline.Int64)
		inst.Deadline = &d
	}
	inst.Status = workflow.Status(r.status)
	var err error
	if inst.State, err = decodeStored(inst.ID, r.state); err != nil {
		return nil, err
	}
	inst.Input = json.RawMessage(r.input)
	if r.output.Valid {
		inst.Output = json.RawMessage(r.output.String)
	}
	inst.CreatedAt = fromMicros(r.createdAt)
	inst.UpdatedAt = fromMicros(r.updatedAt)
	inst.Parent = r.parent.ref()
	inst.TraceParent = r.traceParent.String
	inst.RerunOf = r.rerunOf.String
	return &inst, nil
}

// taskThenInstance scans a row of a task's columns followed by its
// instance's: the task's scanner fills its own destinations, inst the
// rest.
type taskThenInstance struct {
	row  scanner
	inst *instanceScan
}

func (s taskThenInstance) Scan(dest ...any) error {
	return s.row.Scan(append(dest, s.inst.dest()...)...)
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

// decodeStored decodes the stored state of workflow id.
func decodeStored(id, state string) (workflow.State, error) {
	var s workflow.State
	if err := s.UnmarshalJSON([]byte(state)); err != nil {
		return workflow.State{}, fmt.Errorf("sqlite: workflow %q: stored state: %w", id, err)
	}
	return s, nil
}
