package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

const thumbnailDefinition = `name: thumbnail
steps:
  - id: resize
    type: task
    handler: resize
  - id: publish
    type: task
    handler: echo
    depends_on: [resize]
`

// TestDashboardSearchAndWorkerWarning: the list's search finds ids beyond the
// page shown (the server's id_prefix filter), and the workflow page warns
// about a RUNNING task step whose handler no worker polls for, until one does.
func TestDashboardSearchAndWorkerWarning(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	a := b.tab()
	rows := `document.querySelectorAll('#wf-table tbody tr[data-id]').length`

	// Two per page: order-1001 and order-1002 are shown; the others are older.
	b.run(a, "search beyond the first page",
		chromedp.Navigate(f.url+"/#/workflows?limit=2"),
		waitFor(rows+` === 2 && !!document.querySelector('tr[data-id="order-1001"]')`),
		waitFor(`!document.querySelector('tr[data-id="import-42"]')`),
		setValue("#search", "import-4"),
		waitFor(rows+` === 1 && !!document.querySelector('tr[data-id="import-42"]')`),
		setValue("#search", "welcome-3"),
		waitFor(rows+` === 1 && !!document.querySelector('tr[data-id="welcome-31"]')`),
		// On the page by "contains", beyond it by prefix: both are listed.
		setValue("#search", "order-100"),
		waitFor(rows+` === 2`),
		setValue("#search", "nothing-"),
		waitFor(rows+` === 0 && `+textOf("#wf-table .empty-row")+`.includes('No workflow has an id starting with “nothing-”')`),
		setValue("#search", ""),
		waitFor(rows+` === 2 && !!document.querySelector('tr[data-id="order-1002"]')`),
	)

	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "thumbnail", []byte(thumbnailDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "thumb-1", Definition: "thumbnail", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	warning := `document.querySelector('#wf-worker-warnings [data-handler="resize"]')`
	b.run(a, "warn about a handler nobody polls for",
		chromedp.Navigate(f.url+"/#/workflows/thumb-1"),
		waitFor(`document.querySelector('#step-resize')?.dataset.status === 'RUNNING'`),
		waitFor(warning+`?.textContent.includes('No worker is polling for handler resize')`),
		waitFor(warning+`.textContent.includes('flowd worker --handler resize=COMMAND')`),
		// echo is served by the in-process pool; publish is not RUNNING anyway.
		waitFor(`document.querySelectorAll('#wf-worker-warnings [data-handler]').length === 1`),
	)
	b.shot(a, "workflow-worker-warning")

	// A remote worker polls for resize (and takes the task): the warning goes.
	if _, err := f.client.PollTask(ctx, httpapi.PollRequest{Worker: "resizer-1", Handlers: []string{"resize"}}); err != nil {
		t.Fatal(err)
	}
	b.run(a, "the warning goes once a worker polls",
		waitFor(`document.querySelectorAll('#wf-worker-warnings [data-handler]').length === 0`),
		waitFor(`document.querySelector('#step-resize')?.dataset.status === 'RUNNING'`),
	)
	b.checkNoErrors()
}
