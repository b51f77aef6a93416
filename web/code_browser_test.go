package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

const shopDefinition = `name: shop
code: {handler: shop}
timeout: 1h
retry: {max_attempts: 2, initial_backoff: 2s}
`

// codeRuns is state.code of a code workflow.
type codeRuns struct {
	Run     int    `json:"run"`
	Waiting bool   `json:"waiting"`
	Error   string `json:"error"`
}

func runsOf(t *testing.T, w *workflow.Instance) codeRuns {
	t.Helper()
	var r codeRuns
	if err := json.Unmarshal(w.State.Extra["code"], &r); err != nil {
		t.Fatalf("state.code of %s: %v", w.ID, err)
	}
	return r
}

// pollRun takes the next run task of the shop handler, as the worker
// shop-worker-1, and checks it is run n of workflow id.
func pollRun(t *testing.T, f *fixture, id string, n int) *httpapi.TaskResponse {
	t.Helper()
	wait := 5.0
	task, err := f.client.PollTask(t.Context(), httpapi.PollRequest{Worker: "shop-worker-1", Handlers: []string{"shop"}, WaitSeconds: &wait})
	if err != nil {
		t.Fatal(err)
	}
	if task == nil || task.WorkflowID != id || task.Step != workflow.RunStep(n) || task.Kind != "workflow" {
		t.Fatalf("poll: got %+v, want run %d of %s", task, n, id)
	}
	return task
}

func ptr[T any](v T) *T { return &v }

// TestDashboardCodeWorkflow: a code workflow's page shows what its code
// recorded as a timeline in seq order (steps with their attempts, output
// or error; sleeps with the time they wait until; event waits with their
// event, key and timeout; children linked), and where its runs are; its
// definition's page names the handler, the retry of runs and the workers
// serving it, and draws no graph. The runs are driven over the HTTP API by
// the test, as a worker's SDK would.
func TestDashboardCodeWorkflow(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	a := b.tab()
	ctx := t.Context()
	for name, def := range map[string]string{"shop": shopDefinition, "line": "name: line\nsteps:\n  - {id: approve, type: wait}\n"} {
		if _, _, err := f.client.PutDefinition(ctx, name, []byte(def)); err != nil {
			t.Fatal(err)
		}
	}

	// shop-1, run 1: a step, a step that failed for good after 3
	// attempts, a variable, then a short sleep; run 2 (after the sleep)
	// waits for a long sleep and a child.
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "shop-1", Definition: "shop", Input: json.RawMessage(`{"sku":"A-1"}`)}); err != nil {
		t.Fatal(err)
	}
	run := pollRun(t, f, "shop-1", 1)
	if _, err := f.client.Checkpoint(ctx, run.TaskID, "a", httpapi.CheckpointRequest{Lease: run.Lease, Output: json.RawMessage(`{"reserved":2}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Checkpoint(ctx, run.TaskID, "b", httpapi.CheckpointRequest{Lease: run.Lease, Error: json.RawMessage(`"card declined"`), Attempts: 3}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.SetVariable(ctx, run.TaskID, run.Lease, "stage", json.RawMessage(`"refunding"`)); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Suspend(ctx, run.TaskID, run.Lease, map[string]httpapi.Wait{"nap": {Sleep: ptr("10ms")}}); err != nil {
		t.Fatal(err)
	}
	run = pollRun(t, f, "shop-1", 2)
	if err := f.client.Suspend(ctx, run.TaskID, run.Lease, map[string]httpapi.Wait{
		"later": {Sleep: ptr("1h")},
		"sub":   {Child: &httpapi.ChildWait{Definition: "line", Input: json.RawMessage(`{}`)}},
	}); err != nil {
		t.Fatal(err)
	}
	shop1 := f.waitFor(t, "shop-1 waiting in run 2 with its child started", "shop-1", func(w *workflow.Instance) bool {
		return runsOf(t, w).Waiting && w.State.Steps["sub"].Child() != ""
	})
	child := shop1.State.Steps["sub"].Child()

	// shop-2, run 1: two event waits, one timing out at once; run 2 (after
	// the timeout) fails for good.
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "shop-2", Definition: "shop", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	run = pollRun(t, f, "shop-2", 1)
	if err := f.client.Suspend(ctx, run.TaskID, run.Lease, map[string]httpapi.Wait{
		"approval": {Event: ptr("approved"), Key: "shop-2", Timeout: ptr("10ms")},
		"confirm":  {Event: ptr("confirmed"), Key: "c-7", Timeout: ptr("1h")},
	}); err != nil {
		t.Fatal(err)
	}
	run = pollRun(t, f, "shop-2", 2)
	if err := f.client.FailTask(ctx, run.TaskID, run.Lease, "no approval in time", false); err != nil {
		t.Fatal(err)
	}
	shop2 := f.waitFor(t, "shop-2 failed", "shop-2", func(w *workflow.Instance) bool { return w.Status == workflow.StatusFailed })
	var timeoutAt string
	if err := json.Unmarshal(shop2.State.Steps["confirm"].Extra["timeout_at"], &timeoutAt); err != nil {
		t.Fatalf("confirm has no timeout_at: %v", err)
	}

	// The list shows both with their progress; nothing breaks on them.
	b.run(a, "the list shows code workflows",
		chromedp.Navigate(f.url+"/#/workflows"),
		waitFor(textOf(`tr[data-id="shop-1"]`)+`.includes('RUNNING') && `+textOf(`tr[data-id="shop-1"]`)+`.includes('2/5')`),
		waitFor(textOf(`tr[data-id="shop-2"]`)+`.includes('FAILED')`),
	)

	entries := `[...document.querySelectorAll('#code-timeline > li')]`
	entry := func(name string) string {
		return fmt.Sprintf(`document.querySelector('#code-timeline > li[data-step=%q]')`, name)
	}
	b.run(a, "shop-1's timeline in seq order",
		chromedp.Navigate(f.url+"/#/workflows/shop-1"),
		waitFor(entries+`.map((e) => e.dataset.step + ':' + e.dataset.kind + ':' + e.dataset.status + ':' + e.dataset.seq).join(' ') === `+
			`'a:step:COMPLETED:1 b:step:FAILED:2 nap:sleep:COMPLETED:3 later:sleep:WAITING:4 sub:child:RUNNING:5'`),
		waitFor(`document.querySelector('#code-run')?.textContent === '2'`),
		waitFor(textOf("#code-run-state")+` === 'waiting for later, sub'`),
		waitFor(textOf("#code-handler")+` === 'shop'`),
		waitFor(`!document.querySelector('#code-error')`),
		waitFor(textOf(`#step-a .code-attempts`)+` === '1 attempt'`),
		waitFor(textOf(`#step-a .step-output summary`)+`.includes('{"reserved":2}')`),
		waitFor(textOf(`#step-b .step-error`)+` === 'card declined'`),
		waitFor(textOf(`#step-b .code-attempts`)+` === '3 attempts, all failed'`),
		waitFor(`!document.querySelector('#step-b .step-output')`),
		waitFor(textOf(`#step-nap .code-detail`)+`.startsWith('slept until ')`),
		waitFor(`!!`+entry("nap")+`.querySelector('[data-until]')`),
		// The hour's sleep began moments ago: "in 1h" within half a
		// second of it (the page rounds to the second), "in 59m" after.
		waitFor(textOf(`#step-later .code-detail`)+`.startsWith('sleeps until ') && /\(in (59m|1h)\)/.test(`+textOf(`#step-later .code-detail`)+`)`),
		waitFor(fmt.Sprintf(`document.querySelector('#step-sub a[data-child=%q]') !== null`, child)),
		waitFor(textOf(`#step-sub .code-detail`)+`.includes('child workflow of definition line')`),
		// Only the code records its steps: no Complete… button, no graph.
		waitFor(`!document.querySelector('[data-complete-step]') && !document.querySelector('#wf-steps svg')`),
		// The variable the code set is in the state.
		waitFor(textOf("#state-view")+`.includes('"stage": "refunding"')`),
	)
	b.shot(a, "code-workflow")
	b.run(a, "the state editor leaves the steps and runs to the engine",
		chromedp.Evaluate(`document.getElementById('btn-edit-state').click()`, nil),
		waitFor(`document.getElementById('state-editor') !== null`),
		waitFor(`(() => { const s = JSON.parse(document.getElementById('state-editor').value); return !('code' in s) && !('steps' in s) && s.variables.stage === 'refunding'; })()`),
		waitFor(textOf("#editor-steps-note")+`.includes('recorded by the code')`),
		chromedp.Evaluate(`document.getElementById('btn-discard-edit').click()`, nil),
	)
	b.run(a, "the child wait links to the child",
		chromedp.Evaluate(fmt.Sprintf(`document.querySelector('#step-sub a[data-child=%q]').click()`, child), nil),
		waitFor(fmt.Sprintf(`document.querySelector('#wf-id')?.textContent === %q`, child)),
		waitFor(`document.querySelector('#wf-parent a[data-parent="shop-1"]') !== null`),
		waitFor(`document.querySelector('#step-approve')?.dataset.status === 'WAITING'`),
	)

	b.run(a, "shop-2's timeline: a timeout and the run's error",
		chromedp.Navigate(f.url+"/#/workflows/shop-2"),
		waitFor(entries+`.map((e) => e.dataset.step + ':' + e.dataset.kind + ':' + e.dataset.status).join(' ') === `+
			`'approval:event:FAILED confirm:event:CANCELLED'`),
		waitFor(`document.querySelector('#code-run')?.textContent === '2'`),
		waitFor(textOf("#code-run-state")+` === 'failed'`),
		waitFor(textOf("#code-error")+` === 'run 2 failed (attempt 1): no approval in time'`),
		waitFor(textOf(`#step-approval .step-error`)+` === 'timeout: no event "approved" came within 10ms'`),
		waitFor(`document.querySelector('#step-approval .step-error').dataset.errorType === 'timeout'`),
		waitFor(textOf(`#step-approval .code-detail`)+`.startsWith('waited for event approved · key shop-2 · timeout ')`),
		waitFor(textOf(`#step-confirm .code-detail`)+`.startsWith('waited for event confirmed · key c-7 · timeout ')`),
		waitFor(fmt.Sprintf(`document.querySelector('#step-confirm [data-timeout-at]')?.dataset.timeoutAt === %q`, timeoutAt)),
	)
	b.shot(a, "code-workflow-failed")

	// The definition: handler, retry of runs, the worker that polled for
	// its handler; no graph, no steps table.
	workers, err := f.client.ListWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := ""
	for _, w := range workers {
		if w.Worker == "shop-worker-1" {
			node = w.Node
		}
	}
	if node == "" {
		t.Fatalf("GET /v1/workers does not list shop-worker-1 with its node: %+v", workers)
	}
	b.run(a, "the code definition's page",
		chromedp.Navigate(f.url+"/#/definitions"),
		waitFor(textOf(`#def-table tr[data-name="shop"]`)+`.includes('code')`),
		chromedp.Navigate(f.url+"/#/definitions/shop"),
		waitFor(textOf("#def-handler")+` === 'shop'`),
		waitFor(textOf("#def-kind")+` === 'code'`),
		waitFor(textOf("#def-run-retry")+` === '2 attempts, backoff from 2s up to 1m'`),
		waitFor(`[...document.querySelectorAll('#def-workers tbody tr')].map((r) => r.dataset.worker).join(' ') === 'shop-worker-1'`),
		waitFor(fmt.Sprintf(`[...document.querySelectorAll('#def-workers tr[data-worker="shop-worker-1"] td')].map((td) => td.textContent).join('|') === %q`,
			"shop-worker-1|"+node+"|")+` + document.querySelector('#def-workers tr[data-worker="shop-worker-1"] time').textContent + '|shop'`),
		waitFor(`document.querySelector('#def-workers tr[data-worker="shop-worker-1"] time')?.getAttribute('datetime') !== ''`),
		waitFor(`!document.querySelector('#def-dag') && !document.querySelector('#def-steps') && !document.querySelector('svg')`),
	)
	b.shot(a, "code-definition")
	b.run(a, "a code definition no worker serves says so",
		chromedp.ActionFunc(func(ctx2 context.Context) error {
			_, _, err := f.client.PutDefinition(ctx2, "cart", []byte("name: cart\ncode: {handler: cart}\n"))
			return err
		}),
		chromedp.Navigate(f.url+"/#/definitions/cart"),
		waitFor(textOf("#def-run-retry")+` === '3 attempts, backoff from 1s up to 1m (the defaults)'`),
		waitFor(textOf("#def-workers-none")+`.includes('No worker polled for handler cart')`),
	)
	b.checkNoErrors()
}
