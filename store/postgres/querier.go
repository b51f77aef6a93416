package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/jsondelta"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// dbtx is what both *pgxpool.Pool and pgx.Tx offer, so one querier serves
// the Store (each statement atomic on its own) and the store's own
// multi-statement operations (runTx: all statements in one transaction).
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// querier implements store.Querier on a pool or on a transaction.
type querier struct {
	db dbtx
	// pool is set when db is the pool, nil when db is a transaction: then
	// operations that need several statements (a batch, a group) run in the
	// caller's transaction instead of opening their own.
	pool *pgxpool.Pool
	now  func() time.Time
}

var _ store.Querier = (*querier)(nil)

// errOwnTransaction is the error of an operation that opens a transaction
// of its own (what needs several round trips) called on a querier bound to
// one: the store's own multi-statement operations never do.
func errOwnTransaction(op string) error {
	return fmt.Errorf("postgres: %s runs in a transaction of its own, not in another one", op)
}

// atomically runs fn in a transaction: a new read-committed one on the pool,
// or the caller's when q is already bound to one.
func (q *querier) atomically(ctx context.Context, fn func(*querier) error) error {
	if q.pool == nil {
		return fn(q)
	}
	return q.runTx(ctx, pgx.ReadCommitted, fn)
}

func (q *querier) timestamp() time.Time { return store.Timestamp(q.now()) }

// instanceColumns is the column list scanInstance reads, in its order, of
// the one instance row of a query's FROM (its columns named unqualified).
var instanceColumns = instanceColumnsOf("")

// instanceColumnsOf is instanceColumns of the instance row alias: the
// columns instanceRow.dest reads, then the output, which only a COMPLETED
// instance has.
func instanceColumnsOf(alias string) string {
	a := ""
	if alias != "" {
		a = alias + "."
	}
	return a + "id, " + a + "definition, " + a + "status, " + stateOf(alias) + ", " + a + "input, " + a + "version, " +
		a + "created_at, " + a + "updated_at, " + a + "definition_revision, " + a + "deadline, " + a + "parent_id, " +
		a + "parent_step, " + a + "parent_index, " + a + "traceparent, " + a + "priority, " + a + "rerun_of, " + a + "output"
}

// stateOf is the state of the instance row alias (unqualified columns for
// ""), assembled from the row's header and its steps' records (see
// store.StepRecords). The record table has no column named like the
// instance's, so unqualified names inside it are the instance row's.
func stateOf(alias string) string {
	a := ""
	if alias != "" {
		a = alias + "."
	}
	return "jsonb_set(" + a + "state, '{steps}', coalesce((SELECT jsonb_object_agg(r.step_id, r.record) FROM workflow_steps r WHERE r.instance_id = " + a + "id), '{}'))"
}

// The batch statements and the reads. A batch's history rows are
// parameters, made in Go by historyEntry from the states it read; JSON goes
// in as text parameters with explicit ::jsonb casts.
var (
	// getStoredSQL reads the instance as stored, with its search
	// attributes (Get).
	getStoredSQL = `SELECT ` + instanceColumnsOf("i") + `, ` + searchOf("i") + ` FROM workflow_instances i WHERE i.id = $1`

	// getSQL reads the instance with the attempts its leased tasks run
	// (store.ShowAttemptsInFlight), through the partial index of leased
	// tasks of steps without foreach.
	getSQL = `SELECT ` + instanceColumnsOf("i") + `, l.steps, l.attempts, ` + searchOf("i") + ` FROM workflow_instances i
LEFT JOIN LATERAL (SELECT array_agg(t.step_id) AS steps, array_agg(t.attempt) AS attempts FROM workflow_tasks t
	WHERE t.instance_id = $1 AND t.status = 'LEASED' AND t.iteration = 0) l ON true
WHERE i.id = $1`

	// historySQL reads from the snapshot that version $2's row starts from
	// (a patch row's first element; a snapshot is its own) up to $2 + $3
	// (NULL: no limit).
	historySQL = `SELECT version, status, state, at, cause, actor FROM workflow_history
	WHERE instance_id = $1
		AND version >= coalesce((SELECT coalesce((state->>0)::bigint, version) FROM workflow_history WHERE instance_id = $1 AND version = $2), $2)
		AND ($3::bigint IS NULL OR version < $2 + $3)
	ORDER BY version`

	existsSQL = `SELECT EXISTS (SELECT 1 FROM workflow_instances WHERE id = $1)`
)

// preparedCreate is a checked CreateParams with its statement.
type preparedCreate struct {
	p        store.CreateParams
	state    workflow.State
	now      time.Time
	deadline *time.Time
	tasks    []store.Task
	sql      string
	strict   string // sql failing with FD409 when it creates nothing (ApplyGroup)
	args     []any
}

func (q *querier) prepareCreate(p store.CreateParams) (*preparedCreate, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if err := checkText("definition", p.Definition); err != nil {
		return nil, err
	}
	if p.DefinitionRevision < 0 || p.DefinitionRevision > math.MaxInt32 {
		return nil, fmt.Errorf("%w: definition revision %d is out of range", store.ErrInvalidArgument, p.DefinitionRevision)
	}
	if err := checkText("cause", p.Cause); err != nil {
		return nil, err
	}
	if err := checkJSON("input", p.Input); err != nil {
		return nil, err
	}
	stateJSON, err := marshalState(p.State)
	if err != nil {
		return nil, err
	}
	state, err := decodeState(stateJSON)
	if err != nil {
		return nil, err
	}
	now := q.timestamp()
	deadline := timestampPtr(p.Deadline)
	pc := &preparedCreate{p: p, state: state, now: now, deadline: deadline,
		args: []any{p.ID, p.Definition, string(p.Status), stateJSON, []byte(p.Input), now, p.Cause, p.DefinitionRevision, deadline, p.LatestRevision}}
	if err := checkParent(p.Parent); err != nil {
		return nil, err
	}
	withTasks := len(p.Tasks) > 0 || p.Notify
	var tail []any
	if withTasks {
		rows, cols, err := prepareTasks(p.Tasks, now)
		if err != nil {
			return nil, err
		}
		pc.tasks, tail = rows, cols.tail()
		pc.args = append(append(pc.args, cols.args()...), p.Notify)
	}
	keyed := p.IdempotencyKey != ""
	if keyed {
		pc.args = append(pc.args, p.IdempotencyKey, p.RequestHash, now.Add(-store.IdempotencyKeyTTL))
	}
	pc.args = append(append(pc.args, parentArgs(p.Parent)...), nullText(p.TraceParent))
	pc.args = append(pc.args, tail...)
	pc.args = append(append(pc.args, concurrencyArgs(p.Concurrency)...), int16(p.Priority), p.Actor)
	sr, err := store.SplitState(nil, state, nil)
	if err != nil {
		return nil, err
	}
	header, ids, records := stepArgs(sr)
	pc.args = append(pc.args, header, ids, records)
	slot := p.SlotChange()
	if !slot.None() {
		pc.args = append(pc.args, slotArgs(slot)...)
	}
	pc.args = append(pc.args, nullText(p.RerunOf))
	rows := store.SearchRows(p.Search)
	if rows != nil {
		names, values, kinds := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
		for i, r := range rows {
			names[i], values[i], kinds[i] = r.Name, r.Text, string(r.Kind)
		}
		pc.args = append(pc.args, names, values, kinds)
	}
	st := createStatements[createVariant{withTasks: withTasks, keyed: keyed, slot: !slot.None(), search: rows != nil}]
	pc.sql, pc.strict = st.plain, st.strict
	return pc, nil
}

// result is the outcome of the statement that reported created and stale.
// A taken idempotency key is handled before (Create's keyUsed).
func (pc *preparedCreate) result(created, stale bool) (*workflow.Instance, error) {
	p := pc.p
	switch {
	case stale && !p.LatestRevision:
		return nil, fmt.Errorf("definition %q revision %d: %w", p.Definition, p.DefinitionRevision, store.ErrNotFound)
	case stale:
		return nil, store.StaleRevision(p)
	case !created:
		return nil, fmt.Errorf("workflow %q: %w", p.ID, store.ErrExists)
	}
	for i, t := range p.Tasks {
		*t = pc.tasks[i]
	}
	return &workflow.Instance{
		ID:         p.ID,
		Definition: p.Definition,
		Status:     p.Status,
		State:      pc.state,
		Input:      compactJSON(p.Input),
		Version:    0,
		CreatedAt:  pc.now,
		UpdatedAt:  pc.now,

		DefinitionRevision: p.DefinitionRevision,
		Deadline:           pc.deadline,
		Parent:             p.Parent,
		TraceParent:        p.TraceParent,
		Priority:           p.Priority,
		RerunOf:            p.RerunOf,
		Search:             store.SearchOf(store.SearchRows(p.Search)),
	}, nil
}

// Get returns the instance as stored, or store.ErrNotFound.
func (q *querier) Get(ctx context.Context, id string) (*workflow.Instance, error) {
	if !storableText(id) {
		return nil, store.NotFound(id)
	}
	var search []byte
	inst, err := scanInstance(extraColumns{q.db.QueryRow(ctx, getStoredSQL, id), []any{&search}})
	if err != nil {
		return nil, interpretError(err, id)
	}
	if inst.Search, err = decodeSearch(search); err != nil {
		return nil, err
	}
	return inst, nil
}

// GetWithAttemptsInFlight returns the instance with the attempts its
// leased tasks run, or store.ErrNotFound.
func (q *querier) GetWithAttemptsInFlight(ctx context.Context, id string) (*workflow.Instance, error) {
	if !storableText(id) {
		return nil, store.NotFound(id)
	}
	var (
		steps    []string
		attempts []int32
		search   []byte
	)
	inst, err := scanInstance(extraColumns{q.db.QueryRow(ctx, getSQL, id), []any{&steps, &attempts, &search}})
	if err != nil {
		return nil, interpretError(err, id)
	}
	if inst.Search, err = decodeSearch(search); err != nil {
		return nil, err
	}
	inFlight := make(map[string]int, len(steps))
	for i, s := range steps {
		inFlight[s] = int(attempts[i])
	}
	store.ShowAttemptsInFlight(&inst.State, inFlight)
	return inst, nil
}

// List pages through instances newest first with a keyset cursor. With
// search filters the first one (by name) drives the query: its rows of
// workflow_search are read from their index in the list's order, from the
// cursor on, and joined with their instances; the other filters are
// checked on each.
func (q *querier) List(ctx context.Context, p store.ListParams) (store.ListPage, error) {
	if err := p.Normalize(); err != nil {
		return store.ListPage{}, err
	}
	sql, args, none, err := listSQL(p)
	if err != nil {
		return store.ListPage{}, err
	}
	if none {
		return store.ListPage{Instances: []*workflow.Instance{}}, nil
	}
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return store.ListPage{}, interpretError(err, "")
	}
	defer rows.Close()
	page := store.ListPage{Instances: make([]*workflow.Instance, 0, min(p.Limit, 64))}
	more := false
	for rows.Next() {
		if len(page.Instances) == p.Limit {
			more = true
			break
		}
		var search []byte
		inst, err := scanInstance(extraColumns{rows, []any{&search}})
		if err != nil {
			return store.ListPage{}, interpretError(err, "")
		}
		if inst.Search, err = decodeSearch(search); err != nil {
			return store.ListPage{}, err
		}
		page.Instances = append(page.Instances, inst)
	}
	if err := rows.Err(); err != nil {
		return store.ListPage{}, interpretError(err, "")
	}
	if more {
		last := page.Instances[len(page.Instances)-1]
		page.NextCursor = store.EncodeCursor(store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// listSQL is List's statement for p (normalised) and its arguments; none
// when nothing can match.
func listSQL(p store.ListParams) (sql string, args []any, none bool, err error) {
	// The query text is assembled from fixed fragments; only placeholder
	// numbers vary, never input.
	var where []string
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !storableText(p.Definition) {
		// Create refuses such a definition, so nothing matches.
		return "", nil, true, nil
	}
	filters := p.SearchFilters()
	for _, f := range filters {
		if !storableText(f.Value) {
			return "", nil, true, nil // nor such a value
		}
	}
	// order names the columns of the list's order: the driving search
	// row's copy of them, or the instance's own.
	from, created, id := "workflow_instances i", "i.created_at", "i.id"
	if len(filters) > 0 {
		from, created, id = "workflow_search s0 JOIN workflow_instances i ON i.id = s0.instance_id", "s0.created_at", "s0.instance_id"
		where = append(where, "s0.name = "+arg(filters[0].Name), "s0.value = "+arg(filters[0].Value))
		// The others are looked up by the primary key of each row the
		// first one found: a scalar subquery, which the planner cannot turn
		// into a join that reads every row of a common value (as a generic
		// plan, knowing no value, would) and sorts them.
		for k, f := range filters[1:] {
			s := "s" + strconv.Itoa(k+1)
			where = append(where, "(SELECT "+s+".value FROM workflow_search "+s+" WHERE "+s+".instance_id = i.id AND "+
				s+".name = "+arg(f.Name)+") = "+arg(f.Value))
		}
	}
	if p.Status != "" {
		where = append(where, "i.status = "+arg(string(p.Status)))
	}
	if p.Definition != "" {
		where = append(where, "i.definition = "+arg(p.Definition))
	}
	if p.Parent != "" {
		where = append(where, "i.parent_id = "+arg(p.Parent))
	}
	if p.RerunOf != "" {
		where = append(where, "i.rerun_of = "+arg(p.RerunOf))
	}
	if p.IDPrefix != "" {
		// LIKE with every wildcard escaped, not a range: a range compares
		// under the column's collation, which need not be byte order, and
		// would then miss ids. Under the C collation the planner turns the
		// fixed prefix into a range on the primary key itself.
		where = append(where, "i.id LIKE "+arg(likePrefix(p.IDPrefix))+` ESCAPE '\'`)
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, created+" > "+arg(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, created+" < "+arg(p.CreatedBefore))
	}
	if !p.UpdatedBefore.IsZero() {
		where = append(where, "i.updated_at < "+arg(p.UpdatedBefore))
	}
	if p.Cursor != "" {
		c, err := store.DecodeCursor(p.Cursor)
		if err != nil {
			return "", nil, false, err
		}
		where = append(where, "("+created+", "+id+") < ("+arg(c.CreatedAt)+", "+arg(c.ID)+")")
	}
	var sb strings.Builder
	sb.WriteString("SELECT " + instanceColumnsOf("i") + ", " + searchOf("i") + " FROM " + from)
	if len(where) > 0 {
		sb.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	// One row more than asked tells whether a next page exists.
	sb.WriteString(" ORDER BY " + created + " DESC, " + id + " DESC LIMIT " + arg(p.Limit+1))

	return sb.String(), args, false, nil
}

// searchOf is the search attributes of the instance row alias as one JSON
// object, NULL for none (decodeSearch).
func searchOf(alias string) string {
	return `(SELECT jsonb_object_agg(s.name, CASE s.kind WHEN 'string' THEN to_jsonb(s.value) ELSE s.value::jsonb END) FROM workflow_search s WHERE s.instance_id = ` + alias + `.id)`
}

// decodeSearch reads searchOf's column.
func decodeSearch(b []byte) (map[string]json.RawMessage, error) {
	if b == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("postgres: stored search attributes cannot be decoded: %w", err)
	}
	for k, v := range m {
		m[k] = compactJSON(v)
	}
	return m, nil
}

// storableText reports whether s can be a PostgreSQL text value (and so a
// jsonb object key): valid UTF-8 without NUL. Strings are checked before they
// are sent, because a statement that fails aborts the caller's transaction.
// Ids and step ids that cannot be stored cannot exist either (not found,
// unknown step); free text that cannot be stored is an invalid argument.
func storableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// likePrefix is the LIKE pattern of the strings that start with prefix: its
// characters are literal, "%", "_" and "\" included.
func likePrefix(prefix string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(prefix) + "%"
}

// checkJSON is checkText for a JSON document: jsonb refuses invalid UTF-8
// and the escape \u0000 in strings.
func checkJSON(what string, b []byte) error {
	if !utf8.Valid(b) || hasNULEscape(b) {
		return fmt.Errorf("%w: %s contains text that cannot be stored (invalid UTF-8 or \\u0000)", store.ErrInvalidArgument, what)
	}
	return nil
}

// hasNULEscape reports whether the JSON text b has \u0000 in a string. Every
// backslash in valid JSON starts an escape, so skipping the escaped
// character keeps "\\u0000" (a backslash, then "u0000") from matching.
func hasNULEscape(b []byte) bool {
	for i := 0; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if bytes.HasPrefix(b[i+1:], []byte("u0000")) {
			return true
		}
		i++
	}
	return false
}

// marshalState encodes a validated state for a jsonb parameter.
func marshalState(s workflow.State) ([]byte, error) {
	// MarshalJSON directly: json.Marshal would validate and compact its
	// output once more.
	return storableState(s.MarshalJSON())
}

func storableState(b []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: %w", workflow.ErrInvalidState, err)
	}
	if err := checkJSON("state", b); err != nil {
		return nil, err
	}
	return b, nil
}

func checkText(what, s string) error {
	if !storableText(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8 text without NUL characters", store.ErrInvalidArgument, what)
	}
	return nil
}

// timestampPtr returns a normalised copy of *t (store.Timestamp), or nil:
// the result never aliases the caller's value.
func timestampPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	ts := store.Timestamp(*t)
	return &ts
}

// utcPtr puts a time read from the database (local time zone) in UTC.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ceilMicro rounds t up to a microsecond. Stored times have microsecond
// precision, so for a stored u, u < t exactly when u < ceilMicro(t); plain
// truncation (what the driver does) would drop rows just before t.
func ceilMicro(t time.Time) time.Time {
	c := t.Truncate(time.Microsecond)
	if c.Before(t) {
		c = c.Add(time.Microsecond)
	}
	return c
}

// History returns every version of the instance, oldest first.
func (q *querier) History(ctx context.Context, id string, since int64, limit int) ([]store.HistoryEntry, error) {
	if err := store.CheckHistoryRange(since, limit); err != nil {
		return nil, err
	}
	if !storableText(id) {
		return nil, store.NotFound(id)
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := q.db.Query(ctx, historySQL, id, since, lim)
	if err != nil {
		return nil, interpretError(err, id)
	}
	defer rows.Close()
	out := []store.HistoryEntry{}
	replay := jsondelta.NewReplay(jsondelta.JSONB)
	for rows.Next() {
		var (
			e      store.HistoryEntry
			status string
			row    []byte
		)
		if err := rows.Scan(&e.Version, &status, &row, &e.At, &e.Cause, &e.Actor); err != nil {
			return nil, interpretError(err, id)
		}
		// The replay keeps references into the row.
		if err := replay.Next(bytes.Clone(row)); err != nil {
			return nil, fmt.Errorf("postgres: workflow %q history version %d: %w", id, e.Version, err)
		}
		if e.Version < since {
			continue // on the way from the snapshot
		}
		e.Status = workflow.Status(status)
		e.At = e.At.UTC()
		if e.State, err = decodeState(replay.State()); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, id)
	}
	if len(out) == 0 {
		// An instance has every version from 0 on: since is beyond its
		// current version, or there is no such instance.
		var exists bool
		if err := q.db.QueryRow(ctx, existsSQL, id).Scan(&exists); err != nil {
			return nil, interpretError(err, id)
		}
		if !exists {
			return nil, store.NotFound(id)
		}
	}
	return out, nil
}

// scanInstance reads the columns of instanceColumns.
func scanInstance(row pgx.Row) (*workflow.Instance, error) {
	var r instanceRow
	var output []byte
	if err := row.Scan(append(r.dest(), &output)...); err != nil {
		return nil, err
	}
	inst, err := r.instance()
	if err != nil {
		return nil, err
	}
	if output != nil {
		inst.Output = compactJSON(output)
	}
	return inst, nil
}

// instanceRow receives the columns of instanceBaseColumns.
type instanceRow struct {
	inst         workflow.Instance
	status       string
	state, input []byte
	parent       parentColumns
	traceParent  *string
	priority     int16
	rerunOf      *string
}

func (r *instanceRow) dest() []any {
	return []any{&r.inst.ID, &r.inst.Definition, &r.status, &r.state, &r.input, &r.inst.Version, &r.inst.CreatedAt, &r.inst.UpdatedAt,
		&r.inst.DefinitionRevision, &r.inst.Deadline, &r.parent.id, &r.parent.step, &r.parent.index, &r.traceParent, &r.priority, &r.rerunOf}
}

// instance decodes what was scanned.
func (r *instanceRow) instance() (*workflow.Instance, error) {
	st, err := decodeState(r.state)
	if err != nil {
		return nil, err
	}
	inst := r.inst
	inst.Status = workflow.Status(r.status)
	inst.State = st
	inst.Input = compactJSON(r.input)
	inst.CreatedAt = inst.CreatedAt.UTC()
	inst.UpdatedAt = inst.UpdatedAt.UTC()
	inst.Deadline = utcPtr(inst.Deadline)
	inst.Parent = r.parent.ref()
	if r.traceParent != nil {
		inst.TraceParent = *r.traceParent
	}
	inst.Priority = int(r.priority)
	if r.rerunOf != nil {
		inst.RerunOf = *r.rerunOf
	}
	return &inst, nil
}

// stepArgs are a state's header and its steps' ids and records as
// statement arguments.
func stepArgs(sr store.StepRecords) (header string, ids, records []string) {
	records = make([]string, len(sr.Records))
	for i, r := range sr.Records {
		records[i] = string(r)
	}
	return string(sr.Header), nonNil(sr.IDs), records
}

// nonNil is s, or an empty slice for nil: pgx sends a nil slice as NULL,
// which no array comparison matches.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// decodeState decodes a state as stored. jsonb renders JSON with spaces
// after ':' and ','; the state decoder keeps raw values (variables,
// outputs) compact, the same bytes that encoding/json would produce, and
// validates what it reads, so it runs on the column's bytes directly: one
// pass.
func decodeState(b []byte) (workflow.State, error) {
	var s workflow.State
	if err := s.UnmarshalJSON(b); err != nil {
		return workflow.State{}, fmt.Errorf("postgres: stored state cannot be decoded: %w", err)
	}
	return s, nil
}

// compactJSON removes insignificant whitespace; b is returned as is if it is
// not valid JSON (it always is: it comes from a jsonb column).
func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// historySizeSQL measures one instance's history (store.HistorySize).
var historySizeSQL = `SELECT (SELECT octet_length(` + stateOf("") + `::text) FROM workflow_instances WHERE id = $1),
	count(*), count(*) FILTER (WHERE jsonb_typeof(state) = 'object'),
	coalesce(sum(octet_length(state::text) + octet_length(status) + octet_length(cause)), 0)
FROM workflow_history WHERE instance_id = $1`

// HistorySize measures the history of id; see store.HistorySizer.
func (s *Store) HistorySize(ctx context.Context, id string) (store.HistorySize, error) {
	if !storableText(id) {
		return store.HistorySize{}, store.NotFound(id)
	}
	var hs store.HistorySize
	var stateBytes *int64
	if err := s.pool.QueryRow(ctx, historySizeSQL, id).Scan(&stateBytes, &hs.Versions, &hs.Snapshots, &hs.Bytes); err != nil {
		return store.HistorySize{}, interpretError(err, id)
	}
	if stateBytes == nil {
		return store.HistorySize{}, store.NotFound(id)
	}
	hs.StateBytes = *stateBytes
	return hs, nil
}

var _ store.HistorySizer = (*Store)(nil)
