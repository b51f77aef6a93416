package postgres

import (
	"regexp"
	"strings"
	"testing"
	"time"

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
		use       string // "": workflow_instances_pkey
	}{
		// A claim's leases find each task by its id.
		{"claim lease of tasks", claimLeaseSQL, byKey, "workflow_tasks_pkey"},
		// A read finds the attempts in flight among the instance's leased
		// tasks alone.
		{"get, with the attempts in flight", getSQL, byKey, "workflow_tasks_in_flight_idx"},
		{"apply of one task", applyOneSQL, byKey, ""},
		{"strict apply of one task", applyOneStrictSQL, byKey, ""},
		{"apply of one task, same status", applyStatements[applyShape{oneTask: true, sameStatus: true}], byKey, ""},
		{"strict apply of one task, same status", applyStatements[applyShape{oneTask: true, strict: true, sameStatus: true}], byKey, ""},
		// Several tasks of one instance are found among its tasks.
		{"apply", applySQL, byInstance, ""},
		{"strict apply", applyStrictSQL, byInstance, ""},
	} {
		_, plan := explain(t, s, "", c.sql)
		for _, index := range c.avoid {
			if strings.Contains(plan, index) {
				t.Errorf("%s: the generic plan reads %s:\n%s", c.name, index, plan)
			}
		}
		use := c.use
		if use == "" {
			use = "workflow_instances_pkey"
		}
		if !strings.Contains(plan, use) {
			t.Errorf("%s: the generic plan does not use %s:\n%s", c.name, use, plan)
		}
	}
}

// paramRef is a statement's reference to a parameter.
var paramRef = regexp.MustCompile(`\$(\d+)`)

// A claim probes a queue's priorities only up to the highest one queued
// there: an empty queue (most of the engine's own queues, most of the time)
// costs one index descent, a queue of default-priority tasks three probes.
func TestClaimSkipsEmptyQueues(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, Options{})
	create(t, s, store.CreateParams{ID: "wf", Status: workflow.StatusRunning,
		Tasks: []*store.Task{{InstanceID: "wf", StepID: "s", Queue: "busy", MaxAttempts: 1}}})
	probe := regexp.MustCompile(`Index Scan using workflow_tasks_claim_idx on workflow_tasks t \(actual rows=\d+ loops=(\d+)\)`)
	custom, generic := explain(t, s, "(ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)", claimWithInstancesSQL(3, 1),
		time.Now(), "busy", "idle", "idle too")
	for kind, plan := range map[string]string{"custom": custom, "generic": generic} {
		if m := probe.FindStringSubmatch(plan); m == nil || m[1] != "3" {
			t.Errorf("%s plan: the task probe ran %v times, want 3 (the busy queue's priorities 3, 2, 1):\n%s", kind, m, plan)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s plan scans a table:\n%s", kind, plan)
		}
		// The index holds the whole delivery order (run_at, then id): no
		// sort of the tasks that share a run_at.
		if strings.Contains(plan, "Sort Key: t.run_at") {
			t.Errorf("%s plan sorts what the claim index should give in order:\n%s", kind, plan)
		}
	}
}
