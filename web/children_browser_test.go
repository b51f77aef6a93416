package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

// The workflow page links a parent's workflow step to its child and the
// child back to the parent's step.
func TestDashboardChildWorkflowLinks(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	a := b.tab()
	ctx := t.Context()
	for name, def := range map[string]string{
		"line":  "name: line\nsteps:\n  - {id: approve, type: wait}\n",
		"lines": "name: lines\nsteps:\n  - {id: line, type: workflow, definition: line}\n",
	} {
		if _, _, err := f.client.PutDefinition(ctx, name, []byte(def)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "lines-1", Definition: "lines", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	child := `document.querySelector('#children-line a[data-child]')`
	b.run(a, "the parent's step links to its child",
		chromedp.Navigate(f.url+"/#/workflows/lines-1"),
		waitFor(child+` !== null`),
		waitFor(`document.querySelector('#step-line')?.dataset.status === 'RUNNING'`),
		waitFor(`document.querySelectorAll('#wf-worker-warnings [data-handler]').length === 0`),
	)
	b.shot(a, "workflow-child-link")
	b.run(a, "the child links back to the parent's step",
		chromedp.Evaluate(child+`.click()`, nil),
		waitFor(`location.hash.startsWith('#/workflows/') && location.hash !== '#/workflows/lines-1'`),
		waitFor(`document.querySelector('#wf-parent a[data-parent="lines-1"]') !== null`),
		waitFor(textOf("#wf-parent")+`.includes('step line')`),
		waitFor(`document.querySelector('#step-approve')?.dataset.status === 'WAITING'`),
		chromedp.Evaluate(`document.querySelector('#wf-parent a').click()`, nil),
		waitFor(`location.hash === '#/workflows/lines-1' && document.querySelector('#wf-id')?.textContent === 'lines-1'`),
	)
	b.checkNoErrors()
}
