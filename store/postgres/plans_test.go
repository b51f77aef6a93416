package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// The writes that find their rows by primary key use it in their generic
// plan even on a new database, whose small tables make every index cost the
// same to the planner: a generic plan lives as long as its connection, and
// one reading the instances by status or the queued tasks would read all of
// them at every write.
func TestKeyedWritesUsePrimaryKeys(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	byKey := []string{"workflow_instances_status_updated_at_idx", "workflow_tasks_claim_idx",
		"workflow_tasks_instance_id_step_id_iteration_key", "Seq Scan"}
	byInstance := []string{"workflow_instances_status_updated_at_idx", "workflow_tasks_claim_idx", "Seq Scan"}
	for _, c := range []struct {
		name, sql string
		avoid     []string
	}{
		{"claim write of one task", claimWriteOneSQL, byKey},
		{"apply of one task", applyOneSQL, byKey},
		{"strict apply of one task", applyOneStrictSQL, byKey},
		{"apply of one task, same status", applyStatements[applyShape{oneTask: true, sameStatus: true}], byKey},
		{"strict apply of one task, same status", applyStatements[applyShape{oneTask: true, strict: true, sameStatus: true}], byKey},
		// Several tasks of one instance are found among its tasks.
		{"claim write of tasks", claimWriteSQL, byInstance},
		{"apply", applySQL, byInstance},
		{"strict apply", applyStrictSQL, byInstance},
	} {
		plan := genericPlan(t, s, c.sql)
		for _, index := range c.avoid {
			if strings.Contains(plan, index) {
				t.Errorf("%s: the generic plan reads %s:\n%s", c.name, index, plan)
			}
		}
		if !strings.Contains(plan, "workflow_instances_pkey") {
			t.Errorf("%s: the generic plan does not use workflow_instances_pkey:\n%s", c.name, plan)
		}
	}
}

var paramRef = regexp.MustCompile(`\$(\d+)`)

// genericPlan is the plan PostgreSQL caches for sql once it plans it
// generically, on the store's current tables.
func genericPlan(t *testing.T, s *Store, sql string) string {
	t.Helper()
	return planOf(t, s, sql, false)
}

// planOf is the generic plan of sql; with analyze, as it ran with its
// first parameters given by literals (SQL text), the rest NULL.
func planOf(t *testing.T, s *Store, sql string, analyze bool, literals ...string) string {
	t.Helper()
	n := 0
	for _, m := range paramRef.FindAllStringSubmatch(sql, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	ctx := t.Context()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE keyed")
	defer conn.Exec(ctx, "RESET plan_cache_mode")
	if _, err := conn.Exec(ctx, "PREPARE keyed AS "+sql); err != nil {
		t.Fatalf("PREPARE: %v\n%s", err, sql)
	}
	params := make([]string, n)
	for i := range params {
		params[i] = "NULL"
		if i < len(literals) {
			params[i] = literals[i]
		}
	}
	options := ""
	if analyze {
		options = "(ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN %sEXECUTE keyed(%s)", options, strings.Join(params, ", ")))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}

// A claim probes a queue's priorities only up to the highest one queued
// there: an empty queue (most of the engine's own queues, most of the time)
// costs one index descent, a queue of default-priority tasks three probes.
func TestClaimSkipsEmptyQueues(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	create(t, s, store.CreateParams{ID: "wf", Status: workflow.StatusRunning,
		Tasks: []*store.Task{{InstanceID: "wf", StepID: "s", Queue: "busy", MaxAttempts: 1}}})
	plan := planOf(t, s, claimLockingInstancesSQL(3, 1), true, "now()", "'busy'", "'idle'", "'idle too'")
	probe := regexp.MustCompile(`Index Scan using workflow_tasks_claim_idx on workflow_tasks t \(actual rows=\d+ loops=(\d+)\)`).FindStringSubmatch(plan)
	if probe == nil || probe[1] != "3" {
		t.Errorf("the task probe ran %v times, want 3 (the busy queue's priorities 3, 2, 1):\n%s", probe, plan)
	}
	for _, scan := range []string{"Seq Scan", "Sort  (actual rows=0 loops=3)"} {
		if strings.Contains(plan, scan) {
			t.Errorf("the claim's plan has %q:\n%s", scan, plan)
		}
	}
}
