package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// The SQLite specifics of the engine's operations. The behaviour they share
// with PostgreSQL is checked by the conformance suite (store/storetest).

// t0 is the time the engine tests start from: not UTC and not a whole
// microsecond, so every stored time goes through store.Timestamp.
var t0 = time.Date(2026, 5, 17, 10, 20, 30, 123456789, time.FixedZone("UTC+5", 5*3600))

// openMigrated opens a fresh migrated database file whose clock is t0.
func openMigrated(tb testing.TB) *Store {
	tb.Helper()
	s := openStoreAt(tb, fileURL(tb), func() time.Time { return t0 })
	migrate(tb, s)
	return s
}

// openStoreAt opens url with the clock now and closes it when the test ends.
func openStoreAt(tb testing.TB, url string, now func() time.Time) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), url, Options{Now: now})
	if err != nil {
		tb.Fatalf("Open(%q): %v", url, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// queryPlan returns the detail column of EXPLAIN QUERY PLAN for query.
func queryPlan(tb testing.TB, s *Store, query string, args ...any) []string {
	tb.Helper()
	rows, err := s.readDB.QueryContext(tb.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		tb.Fatalf("EXPLAIN QUERY PLAN: %v\n%s", err, query)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var (
			id, parent, notUsed int
			detail              string
		)
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			tb.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return plan
}

// TestQueryPlans checks that the engine's sweeps and its hot path read
// through the partial indexes made for them, and that no query scans a whole
// table. The plans are those of an empty database without ANALYZE
// statistics, which is when SQLite's planner guesses most.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  []string // each must appear in some line of the plan
	}{
		{"claim, one queue", claimSQL(10), []any{`["q1"]`, 1},
			[]string{"SEARCH c USING INDEX workflow_tasks_claim_idx (queue=? AND priority=? AND run_at<?)"}},
		{"claim, several queues", claimSQL(10), []any{`["q1","q2","flowd:sleep"]`, 1},
			[]string{"SEARCH c USING INDEX workflow_tasks_claim_idx (queue=? AND priority=? AND run_at<?)"}},
		{"get, with the attempts in flight", getSQL, []any{"x"},
			[]string{"USING INDEX workflow_tasks_in_flight_idx (instance_id=?)"}},
		{"lease expiry", dueLeasesSQL, []any{1, 10},
			[]string{"SEARCH t USING INDEX workflow_tasks_expiry_idx (lease_until<?)", "SEARCH i USING INDEX sqlite_autoindex_workflow_instances_1 (id=?)"}},
		{"timeout sweep", dueTimeoutsSQL, []any{1, 10},
			[]string{"USING INDEX workflow_instances_deadline_idx (deadline>? AND deadline<?)"}},
		// List's query with ListParams.RerunOf: the re-runs of an instance.
		{"the re-runs of an instance", "SELECT " + instanceColumns + " FROM workflow_instances WHERE rerun_of = ? ORDER BY created_at DESC, id DESC LIMIT ?", []any{"x", 21},
			[]string{"SEARCH workflow_instances USING INDEX workflow_instances_rerun_of_idx (rerun_of=?)"}},
		{"event safety net", tasksWithEventsSQL, []any{1, 10, 10},
			[]string{"USING INDEX workflow_tasks_event_waits_idx", "USING COVERING INDEX workflow_events_queue_created_at_idx (queue=? AND created_at>?)"}},
	} {
		plan := queryPlan(t, s, c.query, c.args...)
		for _, want := range c.want {
			if !slices.ContainsFunc(plan, func(line string) bool { return strings.Contains(line, want) }) {
				t.Errorf("%s: plan does not contain %q:\n%s", c.name, want, strings.Join(plan, "\n"))
			}
		}
		for _, line := range plan {
			// The claim index holds the whole delivery order (run_at, id):
			// the claim sorts no tie group of the index's rows.
			if strings.Contains(line, "RIGHT PART OF ORDER BY") {
				t.Errorf("%s: sorts rows the index should give in order: %q:\n%s", c.name, line, strings.Join(plan, "\n"))
			}
			// SCAN of a table without an index, or of the instances at all.
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "USING") && !strings.Contains(line, "json_each") && line != "SCAN qs" && line != "SCAN ps" {
				t.Errorf("%s: full table scan %q:\n%s", c.name, line, strings.Join(plan, "\n"))
			}
			if strings.Contains(line, "workflow_instances_status_updated_at_idx") {
				t.Errorf("%s: reads instances by status instead of by id or deadline: %q", c.name, line)
			}
		}
	}

	// The retention sweep reads finished instances through the (status,
	// updated_at) index, bounded by the latest cutoff.
	plan := queryPlan(t, s, expiredFinishedSQL, 1, `{"audit":null,"noisy":5}`, 5, 1000)
	if !slices.ContainsFunc(plan, func(line string) bool {
		return strings.Contains(line, "SEARCH i USING INDEX workflow_instances_status_updated_at_idx (status=? AND updated_at<?)")
	}) {
		t.Errorf("DeleteFinished plan:\n%s", strings.Join(plan, "\n"))
	}

	// The tasks of an instance come in step order from the UNIQUE index,
	// without sorting.
	plan = queryPlan(t, s, `SELECT `+taskColumns+` FROM workflow_tasks WHERE instance_id = ?1 ORDER BY step_id`, "x")
	if len(plan) != 1 || !strings.Contains(plan[0], "USING INDEX sqlite_autoindex_workflow_tasks_2 (instance_id=?)") {
		t.Errorf("TasksOfInstance plan:\n%s", strings.Join(plan, "\n"))
	}
}

// TestSchemaIndexes lists every index of the schema: exactly the ones the
// queries need, and never one on (id, version).
func TestSchemaIndexes(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	rows, err := s.readDB.QueryContext(t.Context(),
		`SELECT tbl_name, name, coalesce(sql, '') FROM sqlite_schema WHERE type = 'index' ORDER BY tbl_name, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var table, name, sql string
		if err := rows.Scan(&table, &name, &sql); err != nil {
			t.Fatal(err)
		}
		got = append(got, table+"."+name)
		if strings.Contains(strings.ReplaceAll(sql, " ", ""), "(id,version") {
			t.Errorf("index %s is on (id, version): %s", name, sql)
		}
	}
	want := []string{
		// The version table's: a version is recorded once (versionsOnce).
		"bulk_operations.bulk_operations_recent",
		"bulk_operations.bulk_operations_running",
		"bulk_operations.sqlite_autoindex_bulk_operations_1",
		"goose_db_version.flowd_goose_version_once",
		// Primary keys and the UNIQUE constraint (SQLite's automatic indexes).
		"idempotency_keys.idempotency_keys_created_at_idx",
		"idempotency_keys.idempotency_keys_workflow_id_idx",
		"idempotency_keys.sqlite_autoindex_idempotency_keys_1",
		"schedules.sqlite_autoindex_schedules_1",
		"workers.sqlite_autoindex_workers_1",
		"workers.workers_last_poll_at_idx",
		"workflow_definition_tombstones.sqlite_autoindex_workflow_definition_tombstones_1",
		"workflow_definitions.sqlite_autoindex_workflow_definitions_1",
		"workflow_events.sqlite_autoindex_workflow_events_1",
		"workflow_events.workflow_events_created_at_idx",
		"workflow_events.workflow_events_queue_created_at_idx",
		"workflow_history.sqlite_autoindex_workflow_history_1",
		"workflow_instances.sqlite_autoindex_workflow_instances_1",
		"workflow_instances.workflow_instances_abandoned_idx",
		"workflow_instances.workflow_instances_concurrency_idx",
		"workflow_instances.workflow_instances_created_at_id_idx",
		"workflow_instances.workflow_instances_deadline_idx",
		"workflow_instances.workflow_instances_definition_created_at_id_idx",
		"workflow_instances.workflow_instances_parent_idx",
		"workflow_instances.workflow_instances_rerun_of_idx",
		"workflow_instances.workflow_instances_status_updated_at_idx",
		"workflow_search.workflow_search_value_idx",
		"workflow_tasks.sqlite_autoindex_workflow_tasks_1",
		"workflow_tasks.sqlite_autoindex_workflow_tasks_2",
		"workflow_tasks.workflow_tasks_claim_idx",
		"workflow_tasks.workflow_tasks_event_waits_idx",
		"workflow_tasks.workflow_tasks_expiry_idx",
		"workflow_tasks.workflow_tasks_in_flight_idx",
	}
	if !slices.Equal(got, want) {
		t.Errorf("indexes:\n got %q\nwant %q", got, want)
	}
}

// TestMigrationKeepsData applies 00002 to a database that has been at version
// 1 with data in it: the instances and their history stay as they were and
// read back as free-form instances (revision 0, no deadline), and the engine
// can use them at once.
func TestMigrationKeepsData(t *testing.T) {
	t.Parallel()
	s := openStoreAt(t, fileURL(t), func() time.Time { return t0.Add(time.Hour) })
	ctx := t.Context()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writeDB, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatalf("migrating to version 1: %v", err)
	}
	// Version 1 data, written as the version 1 code wrote it.
	created := micros(t0)
	for _, stmt := range []string{
		`INSERT INTO workflow_instances (id, definition, status, state, input, version, created_at, updated_at)
		VALUES ('old', 'order', 'RUNNING', '{"variables":{"n":9007199254740993}}', '{"sku":"x"}', 1, ?1, ?1 + 1)`,
		`INSERT INTO workflow_history (instance_id, version, status, state, at, cause)
		VALUES ('old', 0, 'PENDING', '{}', ?1, 'create'), ('old', 1, 'RUNNING', '{"variables":{"n":9007199254740993}}', ?1 + 1, 'start')`,
	} {
		if _, err := s.writeDB.ExecContext(ctx, stmt, created); err != nil {
			t.Fatalf("version 1 data: %v", err)
		}
	}

	rep := migrate(t, s)
	if len(rep.Applied) != migrationCount-1 || rep.Applied[0].Name != "00002_engine.sql" || rep.Version != schemaVersion {
		t.Fatalf("Migrate on a version 1 database = %+v, want the migrations from 00002_engine.sql on applied", rep)
	}
	got, err := s.Get(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	var n json.RawMessage
	if _, err := got.State.Var("n", &n); err != nil || string(n) != "9007199254740993" {
		t.Errorf("state variable n = %s, %v", n, err)
	}
	if got.Definition != "order" || got.Status != workflow.StatusRunning || got.Version != 1 ||
		string(got.Input) != `{"sku":"x"}` || !got.CreatedAt.Equal(fromMicros(created)) || !got.UpdatedAt.Equal(fromMicros(created+1)) {
		t.Errorf("instance after the migration = %+v", got)
	}
	if got.DefinitionRevision != 0 || got.Deadline != nil {
		t.Errorf("old instance: revision %d, deadline %v; want 0 and none", got.DefinitionRevision, got.Deadline)
	}
	hist, err := s.History(ctx, "old", 0, 0)
	if err != nil || len(hist) != 2 || hist[0].Cause != "create" || hist[1].Cause != "start" || !hist[1].At.Equal(fromMicros(created+1)) {
		t.Errorf("history after the migration = %+v, %v", hist, err)
	}
	// Versions written before actors were recorded have an unknown one.
	for _, e := range hist {
		if e.Actor != store.ActorUnknown {
			t.Errorf("version %d written before the migration: actor %q, want %q", e.Version, e.Actor, store.ActorUnknown)
		}
	}

	// The engine works on the old instance straight away.
	if err := storetest.InsertTasks(ctx, s, []*store.Task{{ID: "t1", InstanceID: "old", StepID: "a", Queue: "q", MaxAttempts: 1, RunAt: t0}}); err != nil {
		t.Fatalf("inserting a task for the old instance: %v", err)
	}
	deadline := t0
	if _, err := storetest.Modify(ctx, s, "old", func(inst *workflow.Instance) error { inst.Deadline = &deadline; return nil }, "deadline"); err != nil {
		t.Fatal(err)
	}
	due, err := s.Due(ctx, store.DueParams{Kind: store.DueTimeouts, Now: t0.Add(time.Second), Limit: 10})
	if err != nil || len(due) != 1 || due[0].Instance.ID != "old" {
		t.Fatalf("Due(timeouts) = %v, %v; want [old]", due, err)
	}
	inst := due[0].Instance
	if _, err := s.Apply(ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
		Status: workflow.StatusTimedOut, State: inst.State, Deadline: inst.Deadline, Cause: "workflow timeout"}); err != nil {
		t.Fatalf("timing the old instance out: %v", err)
	}
	if tasks, err := s.TasksOfInstance(ctx, "old"); err != nil || len(tasks) != 1 || tasks[0].ID != "t1" {
		t.Errorf("the old instance's tasks = %v, %v; want [t1]", tasks, err)
	}
}

// TestEngineSchemaGuards checks what the new tables enforce by themselves.
func TestEngineSchemaGuards(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	ctx := t.Context()
	if _, err := s.Create(ctx, store.CreateParams{ID: "inst"}); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, attempt, max_attempts, run_at, input, created_at, updated_at)
	VALUES (?1, ?2, ?3, 'q', ?4, ?5, ?6, 0, ?7, 0, 0)`
	for _, c := range []struct {
		name string
		args []any
		code int
	}{
		{"unknown status", []any{"t1", "inst", "a", "RUNNING", 0, 1, "null"}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"negative attempt", []any{"t1", "inst", "a", "QUEUED", -1, 1, "null"}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"no attempt allowed", []any{"t1", "inst", "a", "QUEUED", 0, 0, "null"}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"input not JSON", []any{"t1", "inst", "a", "QUEUED", 0, 1, "{"}, sqlite3.SQLITE_CONSTRAINT_CHECK},
		{"unknown instance", []any{"t1", "ghost", "a", "QUEUED", 0, 1, "null"}, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY},
	} {
		_, err := s.writeDB.ExecContext(ctx, insert, c.args...)
		if sqliteCode(err) != c.code {
			t.Errorf("task with %s: got %v (code %d), want code %d", c.name, err, sqliteCode(err), c.code)
		}
	}
	if _, err := s.writeDB.ExecContext(ctx, insert, "t1", "inst", "a", "QUEUED", 0, 1, "null"); err != nil {
		t.Fatal(err)
	}
	_, err := s.writeDB.ExecContext(ctx, insert, "t2", "inst", "a", "QUEUED", 0, 1, "null")
	if sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		t.Errorf("second task for one step: got %v, want a UNIQUE violation", err)
	}
	// STRICT: a timestamp must be an integer.
	_, err = s.writeDB.ExecContext(ctx, `UPDATE workflow_tasks SET run_at = 'soon' WHERE id = 't1'`)
	if err == nil {
		t.Errorf("a text run_at was stored")
	}
	for _, c := range []struct {
		name, stmt string
	}{
		{"revision 0", `INSERT INTO workflow_definitions (name, revision, spec, created_at) VALUES ('d', 0, '{}', 0)`},
		{"spec not JSON", `INSERT INTO workflow_definitions (name, revision, spec, created_at) VALUES ('d', 1, '{', 0)`},
	} {
		if _, err := s.writeDB.ExecContext(ctx, c.stmt); sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_CHECK {
			t.Errorf("definition with %s: got %v, want a CHECK violation", c.name, err)
		}
	}
}

// TestEngineErrors checks the errors the SQLite store maps for the engine's
// operations, beyond the conformance suite: a task for a missing instance,
// values the schema rejects, limits, lock modes.
func TestEngineErrors(t *testing.T) {
	t.Parallel()
	s := openMigrated(t)
	ctx := t.Context()
	if _, err := s.Create(ctx, store.CreateParams{ID: "inst", Status: workflow.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	task := func(id, step string) *store.Task {
		return &store.Task{ID: id, InstanceID: "inst", StepID: step, Queue: "q", MaxAttempts: 1, RunAt: t0}
	}

	insert := func(tasks ...*store.Task) error {
		inst, err := s.Get(ctx, "inst")
		if err != nil {
			return err
		}
		_, err = s.Apply(ctx, &store.Write{ID: "inst", ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
			State: inst.State, Cause: "insert", Insert: tasks})
		return err
	}
	bad := task("t1", "a")
	bad.MaxAttempts = 0
	if err := insert(bad); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("inserting a task with max_attempts 0 = %v, want ErrInvalidArgument", err)
	}
	bad = task("t1", "a")
	bad.Input = json.RawMessage(`{"a":`)
	if err := insert(bad); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("inserting a task with bad input = %v, want ErrInvalidArgument", err)
	}
	if err := insert(task("t1", "a"), nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("inserting a nil task = %v, want ErrInvalidArgument", err)
	}
	// Two tasks for one step in one write: the first is not kept either.
	err := insert(task("t1", "a"), task("t2", "a"))
	if !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), `"t2"`) {
		t.Errorf("inserting two tasks for one step = %v, want ErrExists naming t2", err)
	}
	if tasks, err := s.TasksOfInstance(ctx, "inst"); err != nil || len(tasks) != 0 {
		t.Errorf("tasks after the failed inserts = %v, %v; want none", tasks, err)
	}

	tk := task("t1", "a")
	if err := insert(tk); err != nil {
		t.Fatal(err)
	}
	upd := *tk
	upd.Status = "RUNNING"
	if err := storetest.UpdateTask(ctx, s, &upd, t0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("writing a task with an unknown status = %v, want ErrInvalidArgument", err)
	}
	if got, err := s.Task(ctx, "t1"); err != nil || got.Status != store.TaskQueued || !got.UpdatedAt.Equal(tk.UpdatedAt) {
		t.Errorf("task after refused updates = %+v, %v", got, err)
	}

	for _, limit := range []int{0, -1, store.MaxBatchLimit + 1} {
		if _, err := storetest.Claim(ctx, s, []string{"q"}, t0, limit); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("claim(limit %d) = %v, want ErrInvalidArgument", limit, err)
		}
	}
	if _, _, err := s.PutDefinition(ctx, "order", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetDefinition(ctx, s, "order", -1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetDefinition(revision -1) = %v, want ErrNotFound", err)
	}

	// Queues are data: a repeated queue returns its tasks once, an empty
	// list nothing, and a queue name that looks like SQL or JSON is a name.
	// Each claim leases the task inserted for it, once t1 is leased.
	if got, err := storetest.Claim(ctx, s, []string{"q"}, t0, 10); err != nil || len(got) != 1 || got[0].ID != "t1" {
		t.Fatalf("claim(q) = %v, %v; want [t1]", got, err)
	}
	for i, queues := range [][]string{{"q", "q"}, {"q", `"]`, `') OR 1=1 --`, "q"}} {
		id := fmt.Sprintf("queues%d", i)
		if err := insert(task(id, id)); err != nil {
			t.Fatal(err)
		}
		got, err := storetest.Claim(ctx, s, queues, t0, 10)
		if err != nil || len(got) != 1 || got[0].ID != id {
			t.Errorf("claim(%q) = %v, %v; want [%s]", queues, got, err, id)
		}
	}
	if err := insert(task("last", "last")); err != nil {
		t.Fatal(err)
	}
	if got, err := storetest.Claim(ctx, s, nil, t0, 10); err != nil || len(got) != 0 {
		t.Errorf("claim(no queues) = %#v, %v; want nothing", got, err)
	}
}

// TestClaimTwoStores claims from two Stores on one file (two processes) with
// several goroutines each, every claim a transaction that leases what it got:
// BEGIN IMMEDIATE serialises the claims, so no task is ever claimed twice and
// none is lost, without SKIP LOCKED.
func TestClaimTwoStores(t *testing.T) {
	t.Parallel()
	url := fileURL(t)
	clock := func() time.Time { return t0 }
	a, b := openStoreAt(t, url, clock), openStoreAt(t, url, clock)
	migrate(t, a)
	ctx := t.Context()
	const instances, stepsEach = 20, 10
	for i := range instances {
		id := fmt.Sprintf("inst-%02d", i)
		if _, err := a.Create(ctx, store.CreateParams{ID: id, Status: workflow.StatusRunning}); err != nil {
			t.Fatal(err)
		}
		var tasks []*store.Task
		for j := range stepsEach {
			tasks = append(tasks, &store.Task{InstanceID: id, StepID: fmt.Sprintf("s%d", j), Queue: []string{"q1", "q2"}[j%2], MaxAttempts: 3, RunAt: t0.Add(-time.Duration(j) * time.Second)})
		}
		if err := storetest.InsertTasks(ctx, a, tasks); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu      sync.Mutex
		claimed = map[string]string{}
		wg      sync.WaitGroup
	)
	errs := make(chan error, 16)
	for w := range 16 {
		s := []*Store{a, b}[w%2]
		owner := fmt.Sprintf("worker-%d", w)
		wg.Go(func() {
			for {
				leased, _, err := s.ClaimTasks(ctx, store.ClaimParams{Queues: []string{"q1", "q2"}, Now: t0, Limit: 3, Owner: owner, Lease: time.Minute})
				var got []*store.Task
				for _, c := range leased {
					got = append(got, c.Task)
				}
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, ok := claimed[tk.ID]; ok {
						errs <- fmt.Errorf("task %s claimed by %s and %s", tk.ID, prev, owner)
					}
					claimed[tk.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claimed) != instances*stepsEach {
		t.Errorf("%d tasks claimed, want %d", len(claimed), instances*stepsEach)
	}
	expired, err := b.Due(ctx, store.DueParams{Kind: store.DueLeases, Now: t0.Add(time.Hour), Limit: store.MaxBatchLimit})
	if err != nil || len(expired) != instances*stepsEach {
		t.Errorf("Due(leases) an hour later = %d tasks, %v; want all %d", len(expired), err, instances*stepsEach)
	}
}

// TestPutDefinitionTwoStores puts different specs of one definition from two
// Stores on one file at once: BEGIN IMMEDIATE makes each put see the previous
// one, so every spec gets its own revision and none is lost.
func TestPutDefinitionTwoStores(t *testing.T) {
	t.Parallel()
	url := fileURL(t)
	a, b := openStore(t, url), openStore(t, url)
	migrate(t, a)
	ctx := t.Context()
	const perStore = 20
	revs := make(chan int, 2*perStore)
	errs := make(chan error, 2*perStore)
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b} {
		for j := range perStore {
			wg.Go(func() {
				rev, created, err := s.PutDefinition(ctx, "order", json.RawMessage(fmt.Sprintf(`{"store":%d,"n":%d}`, i, j)))
				if err != nil || !created {
					errs <- fmt.Errorf("PutDefinition = %d, %v, %v", rev, created, err)
					return
				}
				revs <- rev
			})
		}
	}
	wg.Wait()
	close(revs)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var got []int
	for r := range revs {
		got = append(got, r)
	}
	slices.Sort(got)
	for i, r := range got {
		if r != i+1 {
			t.Fatalf("revisions %v, want 1…%d each once", got, 2*perStore)
		}
	}
	// Whitespace does not make a new revision: specs compare compacted.
	rev, created, err := a.PutDefinition(ctx, "order", json.RawMessage(" {\n \"x\" : [1, 2] }"))
	if err != nil || !created {
		t.Fatalf("PutDefinition = %d, %v, %v", rev, created, err)
	}
	if again, created, err := b.PutDefinition(ctx, "order", json.RawMessage(`{"x":[1,2]}`)); err != nil || created || again != rev {
		t.Errorf("PutDefinition of the same spec, compacted = %d, %v, %v; want %d, false", again, created, err, rev)
	}
	if d, err := store.GetDefinition(ctx, b, "order", 0); err != nil || string(d.Spec) != `{"x":[1,2]}` {
		t.Errorf("latest spec = %v, %v; want the compacted form", d, err)
	}
}

// TestEngineMemory runs the engine's operations on sqlite::memory:, where
// reads and writes share one connection: claims, reads and writes must not
// wait for each other.
func TestEngineMemory(t *testing.T) {
	t.Parallel()
	s := openStoreAt(t, "sqlite::memory:", func() time.Time { return t0 })
	migrate(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	deadline := t0
	if _, err := s.Create(ctx, store.CreateParams{ID: "inst", Status: workflow.StatusRunning, DefinitionRevision: 2, Deadline: &deadline}); err != nil {
		t.Fatal(err)
	}
	if err := storetest.InsertTasks(ctx, s, []*store.Task{{ID: "t1", InstanceID: "inst", StepID: "a", Queue: "q", MaxAttempts: 1, RunAt: t0}}); err != nil {
		t.Fatal(err)
	}
	got, err := storetest.Claim(ctx, s, []string{"q"}, t0, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if _, err := s.TasksOfInstance(ctx, "inst"); err != nil {
		t.Fatal(err)
	}
	due, err := s.Due(ctx, store.DueParams{Kind: store.DueTimeouts, Now: t0.Add(time.Second), Limit: 10})
	if err != nil || len(due) != 1 {
		t.Fatalf("Due(timeouts) = %v, %v", due, err)
	}
	inst := due[0].Instance
	_, err = s.Apply(ctx, &store.Write{ID: inst.ID, ExpectedVersion: inst.Version, From: inst.Status,
		Status: workflow.StatusTimedOut, State: inst.State, Deadline: inst.Deadline, Cause: "workflow timeout"})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := store.CountByStatus(ctx, s)
	if err != nil || counts[workflow.StatusTimedOut] != 1 || len(counts) != 1 {
		t.Errorf("CountByStatus = %v, %v; want TIMED_OUT: 1", counts, err)
	}
	if tasks, err := s.TasksOfInstance(ctx, "inst"); err != nil || len(tasks) != 1 {
		t.Errorf("the instance's tasks = %v, %v; want one", tasks, err)
	}
}

// BenchmarkClaim claims from a backlog of ready tasks, most of them in
// other queues or DONE: the cost must not grow with the backlog (see
// claimSQL). Each claim leases its tasks; they are queued again, off the
// clock, before the next.
func BenchmarkClaim(b *testing.B) {
	s := openStoreAt(b, fileURL(b), func() time.Time { return t0 })
	migrate(b, s)
	ctx := b.Context()
	const backlog = 20000
	// Bulk fixture in SQL: going through Apply would take longer than
	// the benchmark.
	for _, stmt := range []string{
		`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?1)
		INSERT INTO workflow_instances (id, status, state, input, created_at, updated_at)
		SELECT 'i' || x, CASE WHEN x % 10 = 0 THEN 'PAUSED' ELSE 'RUNNING' END, '{}', '{}', x, x FROM n`,
		`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?1)
		INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, max_attempts, run_at, input, created_at, updated_at)
		SELECT 't' || x, 'i' || x, 's', 'q' || (x % 4), CASE WHEN x % 5 = 0 THEN 'DONE' ELSE 'QUEUED' END, 3, x, 'null', x, x FROM n`,
	} {
		if _, err := s.writeDB.ExecContext(ctx, stmt, backlog); err != nil {
			b.Fatal(err)
		}
	}
	// The engine's in-process claim asks for its handlers' queues and its
	// own, most of them empty most of the time.
	engineQueues := []string{"q1", store.QueueSleep, store.QueueHTTP, store.QueueChild, store.QueueTick, store.QueueSWCall, store.QueueSWEmit}
	for _, queues := range [][]string{{"q1"}, {"q0", "q1", "q2", "q3", store.QueueSleep}, engineQueues} {
		b.Run(fmt.Sprintf("queues=%d", len(queues)), func(b *testing.B) {
			for b.Loop() {
				got, err := storetest.Claim(ctx, s, queues, fromMicros(backlog), 10)
				if err == nil && len(got) != 10 {
					err = fmt.Errorf("claimed %d tasks, want 10", len(got))
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := s.writeDB.ExecContext(ctx, `UPDATE workflow_tasks SET status = 'QUEUED', attempt = 0, lease = '',
					lease_owner = '', lease_until = NULL, attempt_deadline = NULL WHERE status = 'LEASED'`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
