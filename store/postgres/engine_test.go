package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/store/storetest"
	"github.com/flowd/flowd/workflow"
)

// PostgreSQL-specific tests of the engine's operations (tasks.go,
// definitions.go, listen.go): plans, statement counts, sessions. Their shared
// behaviour is the conformance suite's.

// taskFixture fills a migrated store the way a busy node's tables look: 2000
// instances, a tenth of them RUNNING (the others COMPLETED, their deadlines
// kept), and 5000 tasks over four queues, most of them DONE, 5 % QUEUED and
// 2 % LEASED; then it analyses the tables, so the planner knows their shape.
// Written with SQL directly: thousands of Create calls would only be slow.
func taskFixture(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := t.Context()
	for _, sql := range []string{
		`INSERT INTO workflow_instances (id, status, state, input, created_at, updated_at, deadline)
		SELECT format('w%s', lpad(i::text, 4, '0')), CASE WHEN i % 10 = 0 THEN 'RUNNING' ELSE 'COMPLETED' END,
			'{}', '{}', $1, $1, $1::timestamptz + (i - 1000) * interval '1 minute'
		FROM generate_series(0, 1999) AS i`,
		`INSERT INTO workflow_history (instance_id, version, status, state, at, actor)
		SELECT id, 0, status, state, created_at, 'engine' FROM workflow_instances`,
		`INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, max_attempts, run_at,
			lease, lease_until, input, created_at, updated_at)
		SELECT format('t%s', lpad(i::text, 4, '0')), format('w%s', lpad((i % 2000)::text, 4, '0')), format('s%s', i / 2000),
			(ARRAY['reserve', 'charge', 'flowd:sleep', 'flowd:http'])[i % 4 + 1],
			CASE WHEN i % 100 < 5 THEN 'QUEUED' WHEN i % 100 < 7 THEN 'LEASED' ELSE 'DONE' END, 3,
			$1::timestamptz + (i - 2500) * interval '1 second',
			CASE WHEN i % 100 BETWEEN 5 AND 6 THEN 'l' ELSE '' END,
			CASE WHEN i % 100 BETWEEN 5 AND 6 THEN $1::timestamptz + (i - 2500) * interval '1 second' END,
			'{}', $1, $1
		FROM generate_series(0, 4999) AS i`,
		`ANALYZE workflow_tasks, workflow_instances`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, now)
		}
		if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("fixture: %v\n%s", err, sql)
		}
	}
}

// explain returns the plan of sql with args, as EXPLAIN with options
// ("(ANALYZE, FORMAT JSON)", …; "" for none) prints it: the custom plan
// PostgreSQL makes for these values, and the generic plan a prepared
// statement may switch to after a few executions (pgx caches statements).
func explain(t *testing.T, s *Store, options, sql string, args ...any) (custom, generic string) {
	t.Helper()
	// The parameters not given are NULL.
	for _, m := range paramRef.FindAllStringSubmatch(sql, -1) {
		if k, _ := strconv.Atoi(m[1]); k > len(args) {
			args = append(args, make([]any, k-len(args))...)
		}
	}
	ctx := t.Context()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The session settings below must not reach other statements: the
	// connection leaves the pool and is closed.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	lines := func(sql string, args ...any) string {
		t.Helper()
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return strings.Join(plan, "\n")
	}
	custom = lines("EXPLAIN "+options+" "+sql, args...)
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "PREPARE explained AS "+sql); err != nil {
		t.Fatal(err)
	}
	// EXPLAIN EXECUTE takes the arguments as literals, quoted by the
	// server.
	var lits []string
	for i, a := range args {
		lit := "NULL"
		if a == nil {
			lits = append(lits, lit)
			continue
		}
		if err := conn.QueryRow(ctx, "SELECT quote_literal($1::text)", textArg(a)).Scan(&lit); err != nil {
			t.Fatalf("literal %d: %v", i, err)
		}
		lits = append(lits, lit)
	}
	generic = lines("EXPLAIN " + options + " EXECUTE explained(" + strings.Join(lits, ", ") + ")")
	return custom, generic
}

// textArg renders an argument of explain as PostgreSQL input text.
func textArg(a any) string {
	switch v := a.(type) {
	case []string:
		quoted := make([]string, len(v))
		for i, e := range v {
			quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(e) + `"`
		}
		return "{" + strings.Join(quoted, ",") + "}"
	case []int32:
		return "{" + strings.ReplaceAll(strings.Trim(fmt.Sprint(v), "[]"), " ", ",") + "}"
	case []time.Time:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = e.Format(time.RFC3339Nano)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []*time.Time:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = "NULL"
			if e != nil {
				parts[i] = e.Format(time.RFC3339Nano)
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	case time.Time:
		return v.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

// The engine's hot path and its sweeps find their rows through their partial
// indexes, never by scanning the task table (which holds every finished task
// too), with the planner's statistics of a few thousand rows, in both the
// custom and the generic plan.
func TestEngineQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{Now: func() time.Time { return now }})
	taskFixture(t, s, now)

	var rows int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM workflow_tasks").Scan(&rows); err != nil || rows != 5000 {
		t.Fatalf("fixture has %d tasks (%v), want 5000", rows, err)
	}
	for _, tc := range []struct {
		name, sql, index string
		args             []any
	}{
		{"claim", claimSQL(2, 10), "workflow_tasks_claim_idx", []any{now, "reserve", store.QueueSleep}},
		{"Due(leases)", dueLeasesSQL, "workflow_tasks_expiry_idx", []any{now, 100}},
		{"Due(timeouts)", dueTimeoutsSQL, "workflow_instances_deadline_idx", []any{now, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			custom, generic := explain(t, s, "", tc.sql, tc.args...)
			for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
				if !strings.Contains(plan, tc.index) {
					t.Errorf("%s plan does not use %s:\n%s", kind, tc.index, plan)
				}
				if strings.Contains(plan, "Seq Scan on workflow_tasks") || strings.Contains(plan, "Seq Scan on workflow_instances") {
					t.Errorf("%s plan scans a table:\n%s", kind, plan)
				}
				t.Logf("%s plan:\n%s", kind, plan)
			}
		})
	}
	// Finished tasks outnumber live ones by far in a database that has run
	// for a while (here 7% are live, and with the claim index's priority
	// column the planner's costs of a scan and of the indexes are within a
	// few percent): more finished tasks make the fixture say so.
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, max_attempts, run_at, input, created_at, updated_at)
		SELECT format('done%s', i), format('w%s', lpad((i % 2000)::text, 4, '0')), format('done%s', i), 'reserve', 'DONE', 3, $1, '{}', $1, $1
		FROM generate_series(0, 19999) AS i`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `ANALYZE workflow_tasks`); err != nil {
		t.Fatal(err)
	}

	// And the claim query returns what it should on that data: the queued
	// tasks of the two queues due by now, oldest first.
	claimed, err := storetest.Claim(t.Context(), s, []string{"reserve", store.QueueSleep}, now, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 10 {
		t.Fatalf("the claim leased %d tasks, want 10", len(claimed))
	}
	for i, tk := range claimed {
		if tk.Status != store.TaskLeased || (tk.Queue != "reserve" && tk.Queue != store.QueueSleep) || tk.RunAt.After(now) {
			t.Errorf("claimed %+v", tk)
		}
		if i > 0 && tk.RunAt.Before(claimed[i-1].RunAt) {
			t.Errorf("claimed out of run_at order: %v after %v", tk.RunAt, claimed[i-1].RunAt)
		}
	}
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	NodeType    string     `json:"Node Type"`
	Relation    string     `json:"Relation Name"`
	ActualRows  float64    `json:"Actual Rows"`
	ActualLoops float64    `json:"Actual Loops"`
	Plans       []planNode `json:"Plans"`
}

// rowsFrom returns how many rows the nodes scanning relation produced.
func (n planNode) rowsFrom(relation string) float64 {
	var sum float64
	if n.Relation == relation {
		sum += n.ActualRows * n.ActualLoops
	}
	for _, c := range n.Plans {
		sum += c.rowsFrom(relation)
	}
	return sum
}

// The claim's cost does not grow with the backlog: with 100,000 due tasks
// it reads a few dozen tasks per queue (an ordered scan of the claim index
// that stops after limit rows), in the custom and in the generic plan,
// instead of reading and sorting every due task of the queues asked for
// (25,000 per queue here).
func TestClaimIgnoresBacklog(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{})
	ctx := t.Context()
	for _, sql := range []string{
		`INSERT INTO workflow_instances (id, status, state, input, created_at, updated_at)
		SELECT format('w%s', i), 'RUNNING', '{}', '{}', $1, $1 FROM generate_series(0, 9999) AS i`,
		`INSERT INTO workflow_tasks (id, instance_id, step_id, queue, status, max_attempts, run_at, input, created_at, updated_at)
		SELECT format('t%s', i), format('w%s', i % 10000), format('s%s', i / 10000),
			(ARRAY['reserve', 'charge', 'flowd:sleep', 'flowd:http'])[i % 4 + 1], 'QUEUED', 3,
			$1::timestamptz - i * interval '1 millisecond', '{}', $1, $1
		FROM generate_series(0, 99999) AS i`,
	} {
		if _, err := s.pool.Exec(ctx, sql, now); err != nil {
			t.Fatalf("fixture: %v", err)
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE workflow_tasks, workflow_instances"); err != nil {
		t.Fatal(err)
	}
	const limit = 10
	for _, queues := range [][]string{{"reserve"}, {"reserve", "charge", store.QueueSleep, store.QueueHTTP}} {
		args := []any{now}
		for _, q := range queues {
			args = append(args, q)
		}
		custom, generic := explain(t, s, "(ANALYZE, FORMAT JSON)", claimSQL(len(queues), limit), args...)
		for kind, out := range map[string]string{"custom": custom, "generic": generic} {
			var plans []struct {
				Plan planNode `json:"Plan"`
			}
			if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
				t.Fatalf("EXPLAIN output: %v\n%s", err, out)
			}
			read := plans[0].Plan.rowsFrom("workflow_tasks")
			// Incremental sort reads at least 32 rows a batch.
			if max := float64(100 * len(queues)); read > max {
				t.Errorf("%d queues, %s plan: read %v task rows, want at most %v:\n%s", len(queues), kind, read, max, out)
			}
		}
		start := time.Now()
		got, err := storetest.Claim(ctx, s, queues, now, limit)
		if err != nil || len(got) != limit {
			t.Fatalf("claim = %d tasks, %v; want %d", len(got), err, limit)
		}
		t.Logf("%d queues: claimed %d of 100,000 due tasks in %v", len(queues), len(got), time.Since(start))
		// The oldest of the queues asked for: t99999, t99998, … of their queues.
		for i, tk := range got {
			if i > 0 && tk.RunAt.Before(got[i-1].RunAt) {
				t.Errorf("claimed out of run_at order: %s after %s", tk.ID, got[i-1].ID)
			}
		}
		if len(queues) == 4 && got[0].ID != "t99999" {
			t.Errorf("first claimed task = %s, want the oldest, t99999", got[0].ID)
		}
	}
}

// statementsBetween counts the statements other than transaction control
// and the settings a pipeline runs under.
func statementsBetween(sqls []string) []string {
	var out []string
	for _, sql := range sqls {
		switch strings.ToLower(strings.Fields(sql)[0]) {
		case "begin", "commit", "rollback", "set", "reset":
			continue
		}
		out = append(out, sql)
	}
	return out
}

// An Apply that inserts many tasks, one that writes many task rows alone,
// and the read of many due instances are one statement each (no per-row
// round trips).
func TestEngineStatementCounts(t *testing.T) {
	t.Parallel()
	tr := &recordingTracer{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{Tracer: tr, Now: func() time.Time { return now }})
	ctx := t.Context()

	const nInst, perInst = 50, 20
	past := now.Add(-time.Minute)
	for i := range nInst {
		create(t, s, store.CreateParams{ID: fmt.Sprintf("w%02d", i), Status: workflow.StatusRunning, Deadline: &past})
	}
	insert := func(q store.Querier, step string) []*store.Task {
		var tasks []*store.Task
		for j := range perInst {
			tasks = append(tasks, &store.Task{InstanceID: "w00", StepID: fmt.Sprintf("%s%02d", step, j),
				Queue: "q", MaxAttempts: 1, RunAt: now, Input: json.RawMessage(`{"j":1}`)})
		}
		inst, err := s.Get(ctx, "w00")
		if err != nil {
			t.Fatal(err)
		}
		stop := tr.record()
		_, err = q.Apply(ctx, &store.Write{ID: "w00", ExpectedVersion: inst.Version, From: inst.Status, Status: inst.Status,
			State: inst.State, Deadline: inst.Deadline, Cause: "schedule", Insert: tasks})
		if err != nil {
			t.Fatalf("Apply of %d new tasks: %v", perInst, err)
		}
		if got := statementsBetween(stop()); len(got) != 1 {
			t.Errorf("Apply of %d new tasks sent %d statements, want 1: %.300q", perInst, len(got), got)
		}
		return tasks
	}
	tasks := insert(s, "b")
	for _, tk := range tasks {
		if tk.ID == "" || tk.Status != store.TaskQueued || !tk.CreatedAt.Equal(now) {
			t.Fatalf("Apply did not complete the new task: %+v", tk)
		}
	}
	// Task rows alone.
	w := &store.Write{ID: "w00", TasksOnly: true, Now: now}
	for _, tk := range tasks {
		c := *tk
		c.Status = store.TaskCancelled
		w.Update = append(w.Update, store.TaskWrite{Task: &c, Guard: store.GuardOf(tk)})
	}
	stop := tr.record()
	if _, err := s.Apply(ctx, w); err != nil {
		t.Fatalf("tasks-only Apply: %v", err)
	}
	if got := stop(); len(got) != 1 {
		t.Errorf("a tasks-only Apply of %d tasks sent %d statements, want 1: %.300q", len(tasks), len(got), got)
	}

	stop = tr.record()
	due, err := s.Due(ctx, store.DueParams{Kind: store.DueTimeouts, Now: now, Limit: 1000})
	if err != nil {
		t.Fatalf("Due: %v", err)
	}
	if got := stop(); len(got) != 1 {
		t.Errorf("Due of %d instances sent %d statements, want 1: %q", nInst, len(got), got)
	}
	ids := make([]string, len(due))
	for i, it := range due {
		ids[i] = it.Instance.ID
	}
	if len(ids) != nInst || !slices.IsSorted(ids) { // same deadline: by id
		t.Errorf("Due(timeouts) = %v, want all %d instances in id order", ids, nInst)
	}
}

// Concurrent puts of one definition: different specs all get revisions of
// their own, 1…n without a gap; one spec put by many creates it once.
func TestPutDefinitionConcurrent(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	const n = 16
	type result struct {
		rev     int
		created bool
		err     error
	}
	put := func(specs func(i int) string) []result {
		results := make([]result, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range results {
			wg.Go(func() {
				start.Wait()
				r := &results[i]
				r.rev, r.created, r.err = s.PutDefinition(ctx, "order", json.RawMessage(specs(i)))
			})
		}
		start.Done()
		wg.Wait()
		return results
	}

	revs := map[int]int{}
	for i, r := range put(func(i int) string { return fmt.Sprintf(`{"name":"order","i":%d}`, i) }) {
		if r.err != nil || !r.created {
			t.Fatalf("put %d = %d, %v, %v; want a new revision", i, r.rev, r.created, r.err)
		}
		revs[r.rev] = i
	}
	for rev := 1; rev <= n; rev++ {
		i, ok := revs[rev]
		if !ok {
			t.Fatalf("revisions %v: %d is missing", revs, rev)
		}
		d, err := store.GetDefinition(ctx, s, "order", rev)
		if err != nil || string(d.Spec) != fmt.Sprintf(`{"name":"order","i":%d}`, i) {
			t.Errorf("GetDefinition(order, %d) = %+v, %v; want put %d's spec", rev, d, err, i)
		}
	}

	var created int
	for i, r := range put(func(int) string { return `{"name":"order","same":true}` }) {
		if r.err != nil || r.rev != n+1 {
			t.Fatalf("same-spec put %d = %d, %v, %v; want revision %d", i, r.rev, r.created, r.err, n+1)
		}
		if r.created {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d of the same-spec puts created a revision, want 1", created)
	}
}

// Specs are compared as jsonb (key order and spacing do not count) and
// stored as json, so the bytes put come back unchanged.
func TestDefinitionSpecBytes(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	spec := `{"name":"order","steps":[{"id":"b","n":1.50},{"id":"a"}],"b":1,"a":2}`
	rev, created, err := s.PutDefinition(ctx, "order", json.RawMessage(spec))
	if err != nil || rev != 1 || !created {
		t.Fatalf("PutDefinition = %d, %v, %v", rev, created, err)
	}
	rev, created, err = s.PutDefinition(ctx, "order", json.RawMessage(` {"a":2, "b":1, "steps":[{"n":1.5,"id":"b"},{"id":"a"}], "name":"order"}`))
	if err != nil || rev != 1 || created {
		t.Errorf("PutDefinition of an equal spec = %d, %v, %v; want 1, false", rev, created, err)
	}
	for _, rev := range []int{0, 1} {
		d, err := store.GetDefinition(ctx, s, "order", rev)
		if err != nil || string(d.Spec) != spec || d.Revision != 1 || d.Name != "order" {
			t.Errorf("GetDefinition(order, %d) = %+v, %v; want the bytes put", rev, d, err)
		}
	}
	list, err := s.ListDefinitions(ctx, store.ListDefinitionsParams{})
	if err != nil || len(list) != 1 || string(list[0].Spec) != spec {
		t.Errorf("ListDefinitions = %+v, %v", list, err)
	}
}

// JSON that encoding/json accepts but jsonb refuses is an invalid argument,
// like any other bad input, not a database failure.
func TestJSONRefusedByJSONB(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	ctx := t.Context()
	create(t, s, store.CreateParams{ID: "w"})
	for _, doc := range []string{`{"s":"\ud800"}`, `[1e1000000]`} {
		if !json.Valid([]byte(doc)) {
			t.Fatalf("%s is not valid JSON", doc)
		}
		err := storetest.InsertTasks(ctx, s, []*store.Task{{InstanceID: "w", StepID: "a", Queue: "q", MaxAttempts: 1, Input: json.RawMessage(doc)}})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Apply inserting a task with input %s = %v, want ErrInvalidArgument", doc, err)
		}
		if _, _, err := s.PutDefinition(ctx, "d", json.RawMessage(doc)); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("PutDefinition(%s) = %v, want ErrInvalidArgument", doc, err)
		}
		if _, err := s.Create(ctx, store.CreateParams{Input: json.RawMessage(doc)}); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Create(input %s) = %v, want ErrInvalidArgument", doc, err)
		}
	}
}

// listenerPIDs returns the server pids of the sessions listening for
// Notify on s's database (their last statement is the LISTEN).
func listenerPIDs(t *testing.T, s *Store) []int32 {
	t.Helper()
	rows, err := s.pool.Query(context.WithoutCancel(t.Context()), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+notifyChannel+`' ORDER BY pid`)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitFor polls cond every 10 ms for at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// received reports whether ch delivers a wake-up within d.
func received(ch <-chan struct{}, d time.Duration) bool {
	select {
	case _, ok := <-ch:
		return ok
	case <-time.After(d):
		return false
	}
}

// drain empties ch of a pending wake-up.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// notifier returns a write that notifies: task "n" of instance "n" (created
// on s), written alone and unchanged, with Notify.
func notifier(t *testing.T, s *Store) func(q store.Querier) error {
	t.Helper()
	create(t, s, store.CreateParams{ID: "n", Status: workflow.StatusRunning})
	if err := storetest.InsertTasks(t.Context(), s, []*store.Task{{ID: "n", InstanceID: "n", StepID: "a", Queue: "q", MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	return func(q store.Querier) error {
		tk, err := q.Task(t.Context(), "n")
		if err != nil {
			return err
		}
		_, err = q.Apply(t.Context(), &store.Write{ID: "n", TasksOnly: true, Notify: true,
			Update: []store.TaskWrite{{Task: tk, Guard: store.GuardOf(tk)}}})
		return err
	}
}

// A write's Notify committed through another Store (another node) on the
// same database wakes the listener within a second; one inside a
// transaction only once it commits, and not at all if it rolls back.
func TestListenOtherStore(t *testing.T) {
	t.Parallel()
	s, url := setup(t, Options{})
	other := open(t, url, Options{})
	notify := notifier(t, s)
	ctx := t.Context()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if received(ch, 200*time.Millisecond) {
		t.Fatal("wake-up without a Notify")
	}

	if err := notify(other); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	if !received(ch, time.Second) {
		t.Fatal("no wake-up within 1s of a Notify on the pool")
	}

	errRollback := errors.New("rollback")
	err = other.querier.runTx(ctx, pgx.ReadCommitted, func(tx *querier) error {
		if err := notify(tx); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if received(ch, 300*time.Millisecond) {
		t.Error("wake-up from a rolled-back Notify")
	}

	commit := make(chan struct{})
	notified := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- other.querier.runTx(ctx, pgx.ReadCommitted, func(tx *querier) error {
			err := notify(tx)
			close(notified)
			<-commit
			return err
		})
	}()
	<-notified
	if received(ch, 300*time.Millisecond) {
		t.Error("wake-up before the Notify's transaction committed")
	}
	start := time.Now()
	close(commit)
	if err := <-done; err != nil {
		t.Fatalf("the Notify's transaction: %v", err)
	}
	if !received(ch, time.Second) {
		t.Fatal("no wake-up within 1s of the commit")
	}
	t.Logf("wake-up %v after the commit", time.Since(start))

	// Many notifications while nobody reads coalesce into one pending
	// wake-up, and the listener keeps going.
	for range 20 {
		if err := notify(other); err != nil {
			t.Fatal(err)
		}
	}
	if !received(ch, time.Second) {
		t.Fatal("no wake-up after 20 Notify calls")
	}
	waitFor(t, time.Second, "the listener is stuck", func() bool {
		drain(ch)
		if err := notify(other); err != nil {
			t.Fatal(err)
		}
		return received(ch, 100*time.Millisecond)
	})
}

// pg_terminate_backend on the listener's session (like a server restart or
// a failover): the listener reconnects, sends a wake-up for what it may have
// missed, and receives later notifications again.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	s, url := setup(t, Options{})
	other := open(t, url, Options{})
	notify := notifier(t, s)
	ctx := t.Context()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	var old []int32
	waitFor(t, 5*time.Second, "no session listening", func() bool { old = listenerPIDs(t, s); return len(old) == 1 })

	for round := range 2 {
		var killed bool
		if err := other.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", old[0]).Scan(&killed); err != nil || !killed {
			t.Fatalf("pg_terminate_backend(%d) = %v, %v", old[0], killed, err)
		}
		var now []int32
		waitFor(t, 10*time.Second, "the listener did not reconnect", func() bool {
			now = listenerPIDs(t, s)
			return len(now) == 1 && now[0] != old[0]
		})
		if !received(ch, time.Second) {
			t.Errorf("round %d: no wake-up after reconnecting", round)
		}
		drain(ch)
		if err := notify(other); err != nil {
			t.Fatal(err)
		}
		if !received(ch, time.Second) {
			t.Fatalf("round %d: no wake-up within 1s of a Notify after reconnecting", round)
		}
		old = now
	}
}

// The listener ends with its context, and with Close: its channel is closed
// and its session gone.
func TestListenStops(t *testing.T) {
	t.Parallel()
	s, url := setup(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	waitFor(t, 5*time.Second, "no session listening", func() bool { return len(listenerPIDs(t, s)) == 1 })
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			// A wake-up may be pending; the close follows.
			if _, ok := <-ch; ok {
				t.Fatal("value after cancel")
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed 5s after the context ended")
	}
	waitFor(t, 5*time.Second, "the listening session survived its context", func() bool { return len(listenerPIDs(t, s)) == 0 })

	closing := open(t, url, Options{})
	ch, err = closing.Listen(t.Context())
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	waitFor(t, 5*time.Second, "no session listening", func() bool { return len(listenerPIDs(t, s)) == 1 })
	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after Close")
	}
	waitFor(t, 5*time.Second, "the listening session survived Close", func() bool { return len(listenerPIDs(t, s)) == 0 })

	if _, err := closing.Listen(t.Context()); err == nil {
		t.Error("Listen on a closed store succeeded")
	}

	// Listen reports a first connection that fails.
	dead, cancelDead := context.WithCancel(t.Context())
	cancelDead()
	if _, err := s.Listen(dead); !errors.Is(err, context.Canceled) {
		t.Errorf("Listen(cancelled context) = %v, want context.Canceled", err)
	}
}

// pgx prepares every statement once per connection; PostgreSQL plans the
// first five executions for their values and then keeps a generic plan if
// it does not look costlier. A hot-path statement whose generic plan looks
// costlier is planned again on every call, which costs more than running it
// (the claim query did: 0.7 ms of planning a claim). This runs the engine's
// and the API's single-row operations a dozen times each on one connection
// and asks the server which statements it is still planning every time.
func TestHotPathKeepsGenericPlans(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := setup(t, Options{MaxConns: 1, Now: func() time.Time { return now }})
	ctx := t.Context()
	const runs = 12
	state := stepsState(map[string]workflow.StepStatus{"a": workflow.StepRunning, "b": workflow.StepPending})
	if _, _, err := s.PutDefinition(ctx, "d", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		id := fmt.Sprintf("w%02d", i)
		create(t, s, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: state})
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Replace(ctx, s, id, 0, state, "replace"); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.CompleteStep(ctx, s, storetest.StepParams{ID: id, StepID: "a", ExpectedVersion: 1}); err != nil {
			t.Fatal(err)
		}
		err := func(tx store.Querier) error {
			for _, queues := range [][]string{{"q"}, {"q", store.QueueSleep, store.QueueHTTP}} {
				if _, err := storetest.Claim(ctx, tx, queues, now, 1); err != nil {
					return err
				}
			}
			task := &store.Task{ID: id + "-b", InstanceID: id, StepID: "b", Queue: "q", MaxAttempts: 1, RunAt: now}
			if err := storetest.InsertTasks(ctx, tx, []*store.Task{task}); err != nil {
				return err
			}
			if _, err := storetest.Modify(ctx, tx, id, func(inst *workflow.Instance) error {
				inst.State.Steps["b"].Status = workflow.StepRunning
				return nil
			}, "claim"); err != nil {
				return err
			}
			locked, err := tx.Task(ctx, task.ID)
			if err != nil {
				return err
			}
			claimed := store.GuardOf(locked)
			locked.Status, locked.Attempt, locked.Lease, locked.LeaseUntil = store.TaskLeased, 1, "l-b", now.Add(time.Minute)
			_, err = tx.Apply(ctx, &store.Write{ID: id, TasksOnly: true, Now: now, Notify: true,
				Update: []store.TaskWrite{{Task: locked, Guard: claimed}}})
			return err
		}(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.Transition(ctx, s, store.TransitionParams{ID: id, From: workflow.StatusRunning, To: workflow.StatusPaused}); err != nil {
			t.Fatal(err)
		}
		// The engine's start (at the latest revision) and claim.
		first := &store.Task{StepID: "a", Queue: "e", MaxAttempts: 1, RunAt: now}
		if _, err := s.Create(ctx, store.CreateParams{ID: id + "-e", Definition: "d", DefinitionRevision: 1, LatestRevision: true,
			Status: workflow.StatusRunning, State: state, Tasks: []*store.Task{first}, Notify: true}); err != nil {
			t.Fatal(err)
		}
		claimed, _, err := s.ClaimTasks(ctx, store.ClaimParams{Queues: []string{"e"}, Now: now, Limit: 1, Owner: "node", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 1 {
			t.Fatalf("claimed %d tasks, want 1", len(claimed))
		}
		// The engine's completions: alone (Apply) and in a group (ApplyGroup),
		// each updating one task.
		leased := claimed[0].Task
		done := *leased
		done.Status, done.Lease, done.LeaseOwner, done.LeaseUntil = store.TaskDone, "", "", time.Time{}
		if _, err := s.Apply(ctx, &store.Write{ID: id + "-e", ExpectedVersion: 0, From: workflow.StatusRunning, Status: workflow.StatusRunning,
			State: state, Cause: "completed", Now: now,
			Update: []store.TaskWrite{{Task: &done, Guard: store.GuardOf(leased)}}}); err != nil {
			t.Fatal(err)
		}
		b, err := s.Task(ctx, id+"-b")
		if err != nil {
			t.Fatal(err)
		}
		read := store.GuardOf(b)
		b.Status = store.TaskDone
		if _, _, err := s.ApplyGroup(ctx, nil, []*store.Write{{ID: id, ExpectedVersion: 5, From: workflow.StatusPaused, Status: workflow.StatusPaused,
			State: state, Cause: "completed", Now: now,
			Update: []store.TaskWrite{{Task: b, Guard: read}}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE generic_plans + custom_plans >= $1`, runs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	// The writes run under force_generic_plan (genericPlansSQL): not even
	// their first executions are planned for their values.
	writes := map[string]bool{}
	for _, sql := range applyStatements {
		writes[sql] = true
	}
	seen := 0
	for rows.Next() {
		var (
			sql             string
			generic, custom int64
		)
		if err := rows.Scan(&sql, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		seen++
		t.Logf("generic %2d, custom %2d: %.80q", generic, custom, sql)
		if generic == 0 {
			t.Errorf("planned anew on each of %d runs: %s", custom, sql)
		}
		if writes[sql] && custom > 0 {
			t.Errorf("a write planned for its values %d times: %.80q", custom, sql)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Errorf("only %d statements ran %d times; the test no longer exercises the hot path", seen, runs)
	}
}

// The writes set force_generic_plan for their own pipeline only: whether
// they commit, miss or fail, the connection goes back to the pool with the
// session's own plan_cache_mode, which the reads plan under.
func TestWritesLeavePlanCacheModeAsItWas(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{MaxConns: 1})
	ctx := t.Context()
	state := stepsState(map[string]workflow.StepStatus{"a": workflow.StepRunning})
	for _, id := range []string{"w", "v"} {
		create(t, s, store.CreateParams{ID: id, Status: workflow.StatusRunning, State: state})
	}
	writeOf := func(id string, version int64) *store.Write {
		return &store.Write{ID: id, ExpectedVersion: version, From: workflow.StatusRunning, Status: workflow.StatusRunning,
			State: state, Cause: "write", Now: time.Now()}
	}
	write := func(version int64) *store.Write { return writeOf("w", version) }
	mode := func(after string) {
		t.Helper()
		var got string
		if err := s.pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "auto" {
			t.Errorf("after %s: plan_cache_mode = %q, want the session's auto", after, got)
		}
	}
	if _, err := s.Apply(ctx, write(0)); err != nil {
		t.Fatal(err)
	}
	mode("a write")
	if _, err := s.Apply(ctx, write(0)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale write: %v, want a conflict", err)
	}
	mode("a stale write")
	if _, _, err := s.ApplyGroup(ctx, nil, []*store.Write{write(1)}, nil); err != nil {
		t.Fatal(err)
	}
	mode("a group")
	if _, _, err := s.ApplyGroup(ctx, nil, []*store.Write{write(1)}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale group: %v, want a conflict", err)
	}
	mode("a stale group")
	if _, err := s.ApplyEach(ctx, []*store.Write{write(2), writeOf("v", 1)}); err != nil {
		t.Fatal(err)
	}
	mode("writes each in a savepoint, one missing")
}
