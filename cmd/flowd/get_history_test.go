package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/workflow"
)

// shopDefinition lists its steps neither in graph order nor by name: get
// shows them in graph order (charge, resize, pack, ship).
const shopDefinition = `name: shop
steps:
  - {id: ship, type: task, handler: work, depends_on: [pack]}
  - {id: pack, type: task, handler: work, depends_on: [charge, resize]}
  - {id: charge, type: task, handler: work, retry: {max_attempts: 3, initial_backoff: 1s}}
  - {id: resize, type: task, handler: work, foreach: .input.images, max_concurrency: 2, input: {image: "{{ .item }}"}}
`

// pollAll leases every task of the work queue that is due, by step (and
// index, for an iteration: "resize#1").
func pollAll(t *testing.T, b *cliBundle) map[string]*api.TaskResponse {
	t.Helper()
	wait := 0.0
	tasks := map[string]*api.TaskResponse{}
	for {
		task, err := b.client.PollTask(t.Context(), api.PollRequest{Worker: "test", Handlers: []string{"work"}, WaitSeconds: &wait})
		if err != nil {
			t.Fatal(err)
		}
		if task == nil {
			return tasks
		}
		name := task.Step
		if task.Index != nil {
			name += fmt.Sprintf("#%d", *task.Index)
		}
		tasks[name] = task
	}
}

// waitForVersion waits until the engine has written version v of id.
func waitForVersion(t *testing.T, b *cliBundle, id string, v int64) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		inst, err := b.client.GetWorkflow(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Version >= v {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still at version %d, want %d", id, inst.Version, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flowd get lists a definition's steps in graph order and a foreach
// step's progress; flowd history shows each failed attempt's error in full,
// the iteration each write was about, and times to the millisecond.
func TestCLIGetAndHistoryOfARunningWorkflow(t *testing.T) {
	t.Parallel()
	b := setupCLIEngine(t)
	ctx := t.Context()
	if _, _, err := b.client.PutDefinition(ctx, "shop", []byte(shopDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "shop-1", Definition: "shop",
		Input: json.RawMessage(`{"images":["a.png","b.png","c.png"]}`)}); err != nil {
		t.Fatal(err)
	}
	tasks := pollAll(t, b)
	if len(tasks) != 3 || tasks["charge"] == nil || tasks["resize#0"] == nil || tasks["resize#1"] == nil {
		t.Fatalf("delivered: %v", tasks)
	}
	b.clock.Advance(1250 * time.Millisecond)
	decline := "card declined: the issuing bank reported insufficient funds for this amount; the customer was told to call it, and the order waits"
	if err := b.client.FailTask(ctx, tasks["charge"].TaskID, tasks["charge"].Lease, decline, true); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(7 * time.Millisecond)
	if err := b.client.CompleteTask(ctx, tasks["resize#0"].TaskID, tasks["resize#0"].Lease, json.RawMessage(`{"resized":"a.png"}`)); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(300 * time.Millisecond)
	if err := b.client.FailTask(ctx, tasks["resize#1"].TaskID, tasks["resize#1"].Lease, "disk full", true); err != nil {
		t.Fatal(err)
	}
	waitForVersion(t, b, "shop-1", 3)
	b.golden("get-graph-order", 0, "", "get", "shop-1")
	b.golden("history-attempts", 0, "", "history", "shop-1")

	// The retry of charge succeeds: its version says so, and shows no
	// error (the one of the attempt before is no news).
	b.clock.Advance(2 * time.Second)
	retry := pollAll(t, b)["charge"]
	if retry == nil || retry.Attempt != 2 {
		t.Fatalf("charge's retry: %+v", retry)
	}
	if err := b.client.CompleteTask(ctx, retry.TaskID, retry.Lease, json.RawMessage(`{"charged":true}`)); err != nil {
		t.Fatal(err)
	}
	waitForVersion(t, b, "shop-1", 4)
	res := b.run("", nil, "history", "shop-1")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `step "charge" completed (attempt 2)`) || !strings.Contains(last, "step charge: RUNNING → COMPLETED") || strings.Contains(last, "error") {
		t.Errorf("the version of charge's completion:\n%s", res.stdout)
	}
}

// flowd get shows the error a Serverless Workflow instance failed with in
// full, one field a line.
func TestCLIGetFailedServerlessWorkflow(t *testing.T) {
	t.Parallel()
	b := setupCLIEngine(t)
	ctx := t.Context()
	doc := `document: {dsl: '1.0.0', namespace: examples, name: refund, version: '1.0.0'}
do:
  - check:
      set: {amount: '${ .amount }'}
  - refuse:
      raise:
        error:
          type: https://serverlessworkflow.io/spec/1.0.0/errors/validation
          status: 422
          title: The refund cannot be made
          detail: '${ "a refund of " + (.amount | tostring) + " EUR exceeds what the order was paid, 30 EUR, by more than the tolerance of 5 percent" }'
`
	if _, _, err := b.client.PutDefinition(ctx, "refund", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "refund-1", Definition: "refund", Input: json.RawMessage(`{"amount":90}`)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		inst, err := b.client.GetWorkflow(ctx, "refund-1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == workflow.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund-1 is %s, want FAILED", inst.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := b.golden("get-sw-failed", 0, "", "get", "refund-1")
	if !strings.Contains(res.stdout, "by more than the tolerance of 5 percent\n") {
		t.Errorf("the error's detail is not shown whole:\n%s", res.stdout)
	}
}

// Steps not in a definition's graph follow in record order (a code
// workflow's seq), then by id with numbers compared as numbers: a
// Serverless Workflow instance's sw-2 comes before its sw-10.
func TestStepOrder(t *testing.T) {
	t.Parallel()
	steps := map[string]*workflow.StepState{}
	for _, id := range []string{"sw-10", "sw-2", "sw-1", "b", "a"} {
		steps[id] = &workflow.StepState{Status: workflow.StepRunning}
	}
	got := strings.Join(stepOrder(steps, []string{"b"}), " ")
	if want := "b a sw-1 sw-2 sw-10"; got != want {
		t.Errorf("stepOrder = %s, want %s", got, want)
	}
	defs := []workflow.Step{
		{ID: "ship", DependsOn: []string{"pack"}}, {ID: "pack", DependsOn: []string{"charge", "resize"}},
		{ID: "charge"}, {ID: "resize"},
	}
	if got, want := strings.Join(graphOrder(defs), " "), "charge resize pack ship"; got != want {
		t.Errorf("graphOrder = %s, want %s", got, want)
	}
}

// A running Serverless Workflow instance's steps name the task of the
// document each runs.
func TestPrintInstanceNamesServerlessTasks(t *testing.T) {
	t.Parallel()
	inst := &workflow.Instance{
		ID: "sw-1", Definition: "greet", Status: workflow.StatusRunning, Input: json.RawMessage(`{}`),
		State: workflow.State{
			Steps: map[string]*workflow.StepState{"sw-2": {Status: workflow.StepRunning}, "sw-10": {Status: workflow.StepRunning}},
			Extra: map[string]json.RawMessage{"sw": json.RawMessage(`{"pending":{"sw-2":{"pointer":"/do/0/reserve"},"sw-10":{"pointer":"/do/1/fork/branches/0/score"}}}`)},
		},
	}
	var b strings.Builder
	if err := printInstance(&b, inst); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	i, j := strings.Index(out, "sw-2 "), strings.Index(out, "sw-10 ")
	if i < 0 || j < i || !strings.Contains(out, "task /do/0/reserve\n") || !strings.Contains(out, "task /do/1/fork/branches/0/score\n") {
		t.Errorf("flowd get of a running Serverless Workflow instance:\n%s", out)
	}
}
