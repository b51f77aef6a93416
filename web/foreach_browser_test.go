package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

const fanoutDefinition = `name: fanout
steps:
  - id: resize
    type: task
    handler: fanout-resize
    foreach: .input.images
    max_concurrency: 2
    input: '{{ .item }}'
`

// TestDashboardForeachProgress: the workflow page shows a foreach step's
// progress — "k/n items" and the iterations running — in the step list and
// in the graph's box.
func TestDashboardForeachProgress(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	a := b.tab()
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "fanout", []byte(fanoutDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "fan-1", Definition: "fanout", Input: json.RawMessage(`{"images":["a.png","b.png","c.png"]}`)}); err != nil {
		t.Fatal(err)
	}
	task, err := f.client.PollTask(ctx, httpapi.PollRequest{Worker: "resizer", Handlers: []string{"fanout-resize"}})
	if err != nil || task == nil {
		t.Fatalf("poll: %v, %v", task, err)
	}
	if err := f.client.CompleteTask(ctx, task.TaskID, task.Lease, json.RawMessage(`"done"`)); err != nil {
		t.Fatal(err)
	}
	progress := `document.querySelector('#step-resize [data-iterations]')`
	b.run(a, "foreach progress in the step list and the graph",
		chromedp.Navigate(f.url+"/#/workflows/fan-1"),
		waitFor(progress+`?.dataset.iterations === '1/3'`),
		waitFor(progress+`.textContent.includes('1/3 items · 2 running')`),
		waitFor(`document.querySelector('#step-resize .tag[title^="foreach"]')?.textContent === 'foreach · 2 at once'`),
		waitFor(`document.querySelector('svg.dag g[data-step="resize"] .node-status')?.textContent === 'RUNNING · 1/3'`),
	)
	b.shot(a, "workflow-foreach-progress")
	b.checkNoErrors()
}
