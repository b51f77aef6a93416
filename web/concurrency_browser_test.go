package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

const limitedDefinition = `name: limited
concurrency: {limit: 1}
steps:
  - {id: hold, type: wait}
`

// A start over a concurrency limit is QUEUED: the list filters by it and
// shows its badge, the workflow page shows it with a cancel button.
func TestDashboardShowsQueuedWorkflows(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "limited", []byte(limitedDefinition)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lim-1", "lim-2"} {
		if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: id, Definition: "limited", Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	tab := b.tab()
	b.run(tab, "filter the list by QUEUED",
		chromedp.Navigate(f.url+"/"),
		waitFor(`!!document.querySelector('tr[data-id="lim-2"]') && !!document.querySelector('tr[data-id="lim-1"]')`),
		setValue("#status-filter", "QUEUED"),
		waitFor(`location.hash === '#/workflows?status=QUEUED'`),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 1 && !!document.querySelector('tr[data-id="lim-2"] .badge.st-QUEUED')`),
	)
	b.run(tab, "the queued workflow's page",
		chromedp.Navigate(f.url+"/#/workflows/lim-2"),
		waitFor(textOf("#wf-status")+` === 'QUEUED'`),
		waitFor(`getComputedStyle(document.querySelector('#wf-status')).backgroundColor !== getComputedStyle(document.querySelector('body')).backgroundColor`),
		waitFor(`!!document.getElementById('btn-cancel') && !document.getElementById('btn-pause')`),
	)
	b.checkNoErrors()
}
