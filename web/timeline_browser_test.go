package web_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

const flakyDefinition = `name: flaky
steps:
  - id: prepare
    type: task
    handler: echo
  - id: call
    type: task
    handler: flaky-call
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 10ms}
    depends_on: [prepare]
  - id: each
    type: task
    handler: echo
    foreach: .input.items
    input: '{{ .item }}'
    depends_on: [prepare]
  - id: approve
    type: wait
    depends_on: [each]
`

const twoCallsSWDocument = `document: {dsl: '1.0.0', namespace: shop, name: twocalls, version: '1.0.0'}
do:
  - first:
      call: echo
      with: {n: 1}
  - second:
      call: fail
      with: {n: 2}
`

// bars lists a row's bars as "kind:outcome" (attempt numbers too, with
// attempts), as a JavaScript expression.
func bars(row string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#wf-timeline g.tl-row[data-row=%q] g.tl-bar')].map(b => b.dataset.kind + ':' + b.dataset.outcome + (b.dataset.attempt !== '0' ? '#' + b.dataset.attempt : '')).join(' ')`, row)
}

// TestDashboardTimeline, on both stores: the workflow page draws a bar per
// attempt — failed attempts marked, waits apart, a foreach step one row
// with a mark per item — for a workflow of steps, for a Serverless
// Workflow instance and for a code workflow.
func TestDashboardTimeline(t *testing.T) {
	t.Parallel()
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowser(t)
			f := newFixtureOn(t, s.open)
			tab := b.tab()
			ctx := t.Context()
			for name, def := range map[string]string{"flaky": flakyDefinition, "twocalls": twoCallsSWDocument, "shop": shopDefinition} {
				if _, _, err := f.client.PutDefinition(ctx, name, []byte(def)); err != nil {
					t.Fatal(err)
				}
			}

			// flaky-1: call fails twice, then a remote worker completes
			// its third attempt; each runs three items; approve waits.
			if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "flaky-1", Definition: "flaky", Input: json.RawMessage(`{"items":[1,2,3]}`)}); err != nil {
				t.Fatal(err)
			}
			wait := 5.0
			for attempt := 1; attempt <= 3; attempt++ {
				task, err := f.client.PollTask(ctx, httpapi.PollRequest{Worker: "caller", Handlers: []string{"flaky-call"}, WaitSeconds: &wait})
				if err != nil || task == nil || task.Attempt != attempt {
					t.Fatalf("poll attempt %d: %+v, %v", attempt, task, err)
				}
				if attempt < 3 {
					err = f.client.FailTask(ctx, task.TaskID, task.Lease, fmt.Sprintf("timeout talking to the bank (attempt %d)", attempt), true)
				} else {
					err = f.client.CompleteTask(ctx, task.TaskID, task.Lease, json.RawMessage(`{"ok":true}`))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			f.waitFor(t, "flaky-1 waiting for approve", "flaky-1", func(w *workflow.Instance) bool {
				return w.State.Steps["approve"].Status == workflow.StepWaiting && w.State.Steps["call"].Status == workflow.StepCompleted
			})
			b.run(tab, "the timeline of a workflow of steps",
				chromedp.Navigate(f.url+"/#/workflows/flaky-1"),
				waitFor(`[...document.querySelectorAll('#wf-timeline g.tl-row')].map(g => g.dataset.row).join() === 'prepare,call,each,approve'`),
				waitFor(bars("prepare")+` === 'run:completed#1'`),
				// Queued until the remote worker took it, two failed attempts, one that completed.
				waitFor(bars("call")+` === 'run:failed#1 run:failed#2 run:completed#3'`),
				waitFor(`document.querySelectorAll('#wf-timeline g.tl-row[data-row="call"] .tl-x').length === 2`),
				waitFor(`document.querySelector('#wf-timeline g.tl-row[data-row="call"] g.tl-failed title')?.textContent.includes('timeout talking to the bank (attempt 1)')`),
				// One row for the foreach step, a mark for its items.
				waitFor(bars("each")+` === 'run:completed'`),
				waitFor(`document.querySelectorAll('#wf-timeline g.tl-row[data-row="each"] line.tl-mark').length >= 1`),
				waitFor(bars("approve")+` === 'wait:running'`),
			)
			b.shot(tab, "timeline-steps-"+s.name)
			b.shotElement(tab, "#wf-timeline", "timeline-card-"+s.name)

			// A Serverless Workflow instance: a row per item.
			if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "two-1", Definition: "twocalls", Input: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			f.waitFor(t, "two-1 failed", "two-1", func(w *workflow.Instance) bool { return w.Status == workflow.StatusFailed })
			b.run(tab, "the timeline of a Serverless Workflow instance",
				chromedp.Navigate(f.url+"/#/workflows/two-1"),
				waitFor(`[...document.querySelectorAll('#wf-timeline g.tl-row .tl-label')].map(t => t.dataset.label).join() === '/do/0/first,/do/1/second'`),
				waitFor(`[...document.querySelectorAll('#wf-timeline g.tl-bar')].map(b => b.dataset.outcome).join() === 'completed,failed'`),
			)
			b.shot(tab, "timeline-serverless-"+s.name)

			// A code workflow: its recorded steps and its sleep.
			if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "shop-9", Definition: "shop", Input: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			run := pollRun(t, f, "shop-9", 1)
			if _, err := f.client.Checkpoint(ctx, run.TaskID, "reserve", httpapi.CheckpointRequest{Lease: run.Lease, Output: json.RawMessage(`{"reserved":2}`)}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.client.Checkpoint(ctx, run.TaskID, "charge", httpapi.CheckpointRequest{Lease: run.Lease, Error: json.RawMessage(`"card declined"`), Attempts: 3}); err != nil {
				t.Fatal(err)
			}
			if err := f.client.Suspend(ctx, run.TaskID, run.Lease, map[string]httpapi.Wait{"later": {Sleep: ptr("1h")}}); err != nil {
				t.Fatal(err)
			}
			b.run(tab, "the timeline of a code workflow",
				chromedp.Navigate(f.url+"/#/workflows/shop-9"),
				waitFor(`[...document.querySelectorAll('#wf-timeline g.tl-row')].map(g => g.dataset.row).join() === 'reserve,charge,later'`),
				waitFor(bars("reserve")+` === 'run:completed#1'`),
				waitFor(bars("charge")+` === 'run:failed#3'`),
				waitFor(bars("later")+` === 'wait:running'`),
			)
			b.shot(tab, "timeline-code-"+s.name)
			b.checkNoErrors()
		})
	}
}
