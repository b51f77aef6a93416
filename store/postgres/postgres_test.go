package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/pgtest"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// These tests cover what is specific to PostgreSQL (statement counts, schema,
// locking, sessions). The behaviour every backend shares is tested by the
// conformance suite (conformance_test.go).

// recordingTracer records the SQL of every statement sent while it is on.
type recordingTracer struct {
	mu   sync.Mutex
	on   bool
	sqls []string
}

func (r *recordingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.sqls = append(r.sqls, data.SQL)
	}
	return ctx
}

func (r *recordingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchQuery records each statement of a pipeline.
func (r *recordingTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	r.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: data.SQL})
}

func (r *recordingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *recordingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// record starts recording and returns a function that stops it and returns
// the statements sent since.
func (r *recordingTracer) record() func() []string {
	r.mu.Lock()
	r.on, r.sqls = true, nil
	r.mu.Unlock()
	return func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.on = false
		return r.sqls
	}
}

// setup opens a migrated store on a fresh database.
func setup(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	s := open(t, url, opts)
	if _, err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s, url
}

func open(t testing.TB, url string, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func create(t testing.TB, q store.Querier, p store.CreateParams) *workflow.Instance {
	t.Helper()
	inst, err := q.Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return inst
}

func stepsState(steps map[string]workflow.StepStatus) workflow.State {
	s := workflow.State{Steps: map[string]*workflow.StepState{}}
	for id, st := range steps {
		s.Steps[id] = &workflow.StepState{Status: st}
	}
	return s
}

// The guarded write is one statement whatever it changes (state, status, a
// step completed in Go), and the read-modify-write helper is a read plus
// that write, never a read under a row lock.
func TestStatementsPerOperation(t *testing.T) {
	t.Parallel()
	tr := &recordingTracer{}
	s, _ := setup(t, Options{Tracer: tr})
	ctx := t.Context()
	inst := create(t, s, store.CreateParams{Status: workflow.StatusRunning, State: stepsState(map[string]workflow.StepStatus{"approve.v2": workflow.StepWaiting})})

	apply := func(what string, status workflow.Status, state workflow.State) {
		t.Helper()
		stop := tr.record()
		next, err := s.Apply(ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
			Status: status, State: state, Cause: what, Prior: &inst.State})
		if err != nil {
			t.Fatalf("Apply (%s): %v", what, err)
		}
		got := statementsBetween(stop())
		if len(got) != 1 {
			t.Errorf("Apply (%s) sent %d statements, want 1: %q", what, len(got), got)
		}
		// The step id is data in a parameter, never part of the SQL text.
		for _, sql := range got {
			if strings.Contains(sql, "approve.v2") {
				t.Errorf("Apply's SQL contains a step id: %s", sql)
			}
		}
		inst = next
	}
	apply("state", inst.Status, stepsState(map[string]workflow.StepStatus{"approve.v2": workflow.StepWaiting, "b": workflow.StepPending}))
	apply("status", workflow.StatusPaused, inst.State.Clone())
	completed := inst.State.Clone()
	if err := completed.CompleteStep("approve.v2", json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	apply("step", inst.Status, completed)
	if st := inst.State.Steps["approve.v2"]; st == nil || st.Status != workflow.StepCompleted || string(st.Output) != `{"ok":true}` {
		t.Errorf("step after its completion = %+v", st)
	}

	stop := tr.record()
	_, err := store.UpdateState(ctx, s, inst.ID, inst.Version, func(st *workflow.State) error { return st.SetVar("n", 1) }, "update")
	if err != nil {
		t.Fatalf("UpdateState: %v", err)
	}
	got := statementsBetween(stop())
	if len(got) != 2 {
		t.Errorf("UpdateState sent %d statements, want 2 (a read and the conditional write): %q", len(got), got)
	}
	for _, sql := range got {
		if strings.Contains(strings.ToUpper(sql), "FOR UPDATE") {
			t.Errorf("UpdateState read under a row lock: %s", sql)
		}
	}
}

// Exactly the indexes the queries need; none on
// (id, version), which would duplicate the primary key. The engine's partial
// indexes have exactly their predicates (TestEngineQueriesUseIndexes checks
// that the queries use them).
func TestIndexes(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	rows, err := s.pool.Query(t.Context(), `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema()
			AND tablename IN ('workflow_instances', 'workflow_history', 'workflow_tasks', 'workflow_definitions', 'workers', 'idempotency_keys', 'workflow_events', 'flowd_rate_buckets',
				'workflow_descendants')`)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"workflow_instances_pkey":                          "(id)",
		"workflow_instances_created_at_id_idx":             "(created_at DESC, id DESC)",
		"workflow_instances_status_updated_at_idx":         "(status, updated_at)",
		"workflow_instances_definition_created_at_id_idx":  "(definition, created_at DESC, id DESC)",
		"workflow_instances_finished_updated_at_idx":       "(updated_at) WHERE (status = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text, 'TIMED_OUT'::text]))",
		"workflow_instances_parent_idx":                    "(parent_id, created_at DESC, id DESC) WHERE (parent_id IS NOT NULL)",
		"workflow_instances_rerun_of_idx":                  "(rerun_of, created_at DESC, id DESC) WHERE (rerun_of IS NOT NULL)",
		"workflow_instances_concurrency_idx":               "(definition, concurrency_key, status, created_at, id) WHERE (concurrency_key IS NOT NULL)",
		"workflow_instances_abandoned_idx":                 "(parent_id) WHERE ((parent_id IS NOT NULL) AND (status = ANY (ARRAY['PENDING'::text, 'QUEUED'::text, 'RUNNING'::text, 'PAUSED'::text])))",
		"workflow_descendants_pkey":                        "(root_id)",
		"workflow_history_pkey":                            "(instance_id, version)",
		"workflow_instances_deadline_idx":                  "(deadline) WHERE ((status = ANY (ARRAY['RUNNING'::text, 'PAUSED'::text])) AND (deadline IS NOT NULL))",
		"workflow_definitions_pkey":                        "(name, revision)",
		"workflow_tasks_pkey":                              "(id)",
		"workflow_tasks_instance_id_step_id_iteration_key": "(instance_id, step_id, iteration)",
		"workflow_tasks_claim_idx":                         "(queue, priority, run_at, id COLLATE \"C\") WHERE (status = 'QUEUED'::text)",
		"workflow_tasks_in_flight_idx":                     "(instance_id) WHERE ((status = 'LEASED'::text) AND (iteration = 0))",
		"flowd_rate_buckets_pkey":                          "(key)",
		"workflow_tasks_expiry_idx":                        "(lease_until) WHERE (status = 'LEASED'::text)",
		"workflow_tasks_event_waits_idx":                   "(updated_at) WHERE ((status = 'QUEUED'::text) AND (queue ~~ 'flowd:event/%'::text))",
		"workflow_events_pkey":                             "(id)",
		"workflow_events_queue_created_at_idx":             "(queue, created_at, id)",
		"workflow_events_created_at_idx":                   "(created_at)",
		"workers_pkey":                                     "(worker, node)",
		"workers_last_poll_at_idx":                         "(last_poll_at)",
		"idempotency_keys_pkey":                            "(key)",
		"idempotency_keys_created_at_idx":                  "(created_at)",
		"idempotency_keys_workflow_id_idx":                 "(workflow_id)",
	}
	if len(defs) != len(want) {
		t.Errorf("indexes = %v, want exactly %v", defs, want)
	}
	for name, cols := range want {
		if !strings.HasSuffix(defs[name], cols) {
			t.Errorf("index %s = %q, want one on %s", name, defs[name], cols)
		}
	}
	for name, def := range defs {
		if strings.Contains(def, "workflow_instances") && strings.Contains(strings.ReplaceAll(def, " ", ""), "(id,version") {
			t.Errorf("index %s is on (id, version): %s", name, def)
		}
	}
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// The database itself refuses a negative version and any rewrite of history,
// whatever client writes.
func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	inst := create(t, s, store.CreateParams{})
	if _, err := storetest.Replace(ctx, s, inst.ID, 0, workflow.State{}, "bump"); err != nil {
		t.Fatal(err)
	}

	_, err := s.pool.Exec(ctx, `UPDATE workflow_instances SET version = -1`)
	if pgCode(err) != codeCheckViolation {
		t.Errorf("UPDATE … SET version = -1: err = %v, want SQLSTATE %s", err, codeCheckViolation)
	}
	if mapped := interpretError(err, inst.ID); !errors.Is(mapped, store.ErrInvalidArgument) {
		t.Errorf("check violation maps to %v, want ErrInvalidArgument", mapped)
	}

	for _, sql := range []string{
		`UPDATE workflow_history SET cause = 'rewritten'`,
		`UPDATE workflow_history SET cause = 'rewritten' WHERE false`,
		// The instance is live, so its history rows cannot go (only a
		// finished instance's, with it: DeleteInstance).
		`DELETE FROM workflow_history`,
		`TRUNCATE workflow_history CASCADE`,
	} {
		if _, err := s.pool.Exec(ctx, sql); err == nil || pgCode(err) != "23001" {
			t.Errorf("%s: err = %v, want the append-only trigger's error (SQLSTATE 23001)", sql, err)
		}
	}
	h, err := s.History(ctx, inst.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Cause != "create" || h[1].Cause != "bump" {
		t.Errorf("history changed: %+v", h)
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	s := open(t, url, Options{})
	first, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	if len(first.Applied) == 0 || first.Applied[0].Version != 1 || first.Applied[0].Name != "00001_init.sql" {
		t.Errorf("first Migrate applied %+v, want 00001_init.sql first", first.Applied)
	}
	if last := first.Applied[len(first.Applied)-1].Version; first.Version != last {
		t.Errorf("first Migrate: version %d, last applied %d", first.Version, last)
	}
	second, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(second.Applied) != 0 || second.Version != first.Version {
		t.Errorf("second Migrate = %+v, want nothing applied at version %d", second, first.Version)
	}
}

// Two nodes starting at once on a fresh database: goose's advisory lock makes
// them take turns, so both succeed and the migrations run once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	stores := []*Store{open(t, url, Options{}), open(t, url, Options{})}
	reports := make([]store.MigrationReport, len(stores))
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { reports[i], errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	if reports[0].Version != reports[1].Version || reports[0].Version == 0 {
		t.Errorf("versions after concurrent Migrate: %d and %d", reports[0].Version, reports[1].Version)
	}
	if (len(reports[0].Applied) > 0) == (len(reports[1].Applied) > 0) {
		t.Errorf("applied %d and %d migrations: exactly one node should apply them", len(reports[0].Applied), len(reports[1].Applied))
	}
	// The schema works.
	create(t, stores[1], store.CreateParams{})
}

// idleInTransaction counts the sessions on url's database that sit inside a
// transaction doing nothing.
func idleInTransaction(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	err := s.pool.QueryRow(context.WithoutCancel(t.Context()), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()

	for _, tc := range []struct {
		name, url, want string
	}{
		{"not postgres", "mysql://u:secret@localhost/db", "must start with postgres://"},
		{"keyword form", "host=localhost password=secret", "must start with postgres://"},
		{"malformed", "postgres://u:secret@[::1/db", "malformed database URL"},
		{"bad option", "postgresql://u:secret@localhost/db?sslmode=sometimes", "postgres: open:"},
		{"unreachable", fmt.Sprintf("postgres://u:secret@127.0.0.1:%d/db?connect_timeout=5", closedPort), "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			s, err := Open(ctx, tc.url, Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) = %q, want it to mention %q", tc.url, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("Open's error reveals the password: %q", err)
			}
		})
	}
}

// The URL scheme postgresql:// works as well as postgres://, and the session
// gets the idle-in-transaction timeout.
func TestOpenSessionSettings(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	url = "postgresql://" + strings.TrimPrefix(url, "postgres://")
	s := open(t, url, Options{MaxConns: 3})
	var timeout string
	if err := s.pool.QueryRow(t.Context(), "SHOW idle_in_transaction_session_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "1min" {
		t.Errorf("idle_in_transaction_session_timeout = %q, want 1min", timeout)
	}
	if got := s.pool.Config().MaxConns; got != 3 {
		t.Errorf("MaxConns = %d, want 3", got)
	}
}

// Two batches at once never return the same id, and together they move
// every matching instance once, oldest first within each batch.
func TestBatchUpdateStatusConcurrent(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Millisecond)
		return clock
	}
	s, _ := setup(t, Options{Now: now})
	ctx := t.Context()
	const n = 200
	for i := range n {
		create(t, s, store.CreateParams{ID: fmt.Sprintf("w%03d", i), Status: workflow.StatusRunning})
	}
	before := now()
	results := make([][]string, 4)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			ids, err := storetest.Batch(ctx, s, store.BatchStatusParams{Status: workflow.StatusRunning, UpdatedBefore: before, NewStatus: workflow.StatusTimedOut, Limit: 30})
			if err != nil {
				t.Errorf("batch: %v", err)
			}
			results[i] = ids
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ids := range results {
		if !slices.IsSorted(ids) { // ids were created in updated_at order
			t.Errorf("batch not oldest first: %v", ids)
		}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("id %s returned twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 4*30 {
		t.Errorf("batches moved %d instances, want %d", len(seen), 4*30)
	}
	h, err := s.History(ctx, "w000", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].Status != workflow.StatusTimedOut || h[1].Version != 1 {
		t.Errorf("history of w000 = %+v", h)
	}
	ids, err := storetest.Batch(ctx, s, store.BatchStatusParams{Status: workflow.StatusPaused, UpdatedBefore: before, NewStatus: workflow.StatusRunning, Limit: 10})
	if err != nil || ids == nil || len(ids) != 0 {
		t.Errorf("empty batch = %#v, %v; want an empty non-nil slice", ids, err)
	}
}

// A smoke test of the read side and the guarded read-modify-write path.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	inst := create(t, s, store.CreateParams{ID: "r1", Definition: "order", Input: json.RawMessage(` {"sku": "A-1", "n": [1, 2]} `)})
	if string(inst.Input) != `{"sku":"A-1","n":[1,2]}` {
		t.Errorf("Create input = %s", inst.Input)
	}
	got, err := s.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt != inst.CreatedAt || got.UpdatedAt != inst.UpdatedAt || got.CreatedAt.Location() != time.UTC {
		t.Errorf("times: created %v/%v updated %v/%v", inst.CreatedAt, got.CreatedAt, inst.UpdatedAt, got.UpdatedAt)
	}
	mod, err := storetest.Modify(ctx, s, "r1", func(in *workflow.Instance) error {
		in.Status = workflow.StatusRunning
		in.Definition = "ignored"
		return in.State.SetVar("x", map[string]int{"a": 1})
	}, "modify")
	if err != nil {
		t.Fatal(err)
	}
	if mod.Version != 1 || mod.Status != workflow.StatusRunning || mod.Definition != "order" || string(mod.State.Variables["x"]) != `{"a":1}` {
		t.Errorf("the guarded read-modify-write = %+v", mod)
	}
	if _, err := storetest.Modify(ctx, s, "r1", func(in *workflow.Instance) error { in.Status = workflow.StatusPending; return nil }, "bad"); !errors.Is(err, workflow.ErrInvalidTransition) {
		t.Errorf("the guarded read-modify-write RUNNING→PENDING = %v, want ErrInvalidTransition", err)
	}
	if _, err := storetest.Modify(ctx, s, "none", func(*workflow.Instance) error { return nil }, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the guarded read-modify-write(none) = %v, want ErrNotFound", err)
	}
	for i := range 5 {
		create(t, s, store.CreateParams{ID: fmt.Sprintf("p%d", i)})
	}
	var all []string
	cursor := ""
	for {
		page, err := s.List(ctx, store.ListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page.Instances {
			all = append(all, in.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 6 {
		t.Errorf("List pages = %v, want 6 ids", all)
	}
	page, err := s.List(ctx, store.ListParams{Definition: "order", Status: workflow.StatusRunning})
	if err != nil || len(page.Instances) != 1 || page.Instances[0].ID != "r1" || page.NextCursor != "" {
		t.Errorf("List(order, RUNNING) = %+v, %v", page, err)
	}
	if _, err := s.List(ctx, store.ListParams{Cursor: "!!"}); !errors.Is(err, store.ErrInvalidCursor) {
		t.Errorf("List(bad cursor) = %v", err)
	}
	h, err := s.History(ctx, "r1", 0, 0)
	if err != nil || len(h) != 2 || h[1].Status != workflow.StatusRunning || h[1].At != mod.UpdatedAt {
		t.Errorf("History = %+v, %v", h, err)
	}
	if _, err := s.History(ctx, "none", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("History(none) = %v", err)
	}
}

func TestHasNULEscape(t *testing.T) {
	for in, want := range map[string]bool{
		`"a\u0000b"`:       true,
		`{"\u0000":1}`:     true,
		`"\\u0000"`:        false, // a backslash, then the text u0000
		`"\\\u0000"`:       true,
		`"u0000"`:          false,
		`"\u00001"`:        true,
		`"\u0001"`:         false,
		`["a", "\"u0000"]`: false,
	} {
		if got := hasNULEscape([]byte(in)); got != want {
			t.Errorf("hasNULEscape(%s) = %v, want %v", in, got, want)
		}
	}
}
