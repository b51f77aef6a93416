package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

const flowControlledDefinition = `name: throttled
priority: 2
steps:
  - {id: fetch, type: task, handler: remote, concurrency: {key: "{{ .input.tenant }}", limit: 2}}
  - {id: notify, type: task, handler: remote, depends_on: [fetch], rate_limit: {key: mail, per_second: 5, burst: 10}}
  - {id: plain, type: task, handler: remote, depends_on: [notify]}
`

// The workflow page shows the instance's priority (the start's override,
// not the definition's) and, on the steps with a concurrency key or a
// rate limit, the key and its bound; a step without either shows neither.
func TestDashboardShowsFlowControl(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "throttled", []byte(flowControlledDefinition)); err != nil {
		t.Fatal(err)
	}
	urgent := 5
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "thr-1", Definition: "throttled", Input: json.RawMessage(`{"tenant": "acme"}`), Priority: &urgent}); err != nil {
		t.Fatal(err)
	}
	tab := b.tab()
	b.run(tab, "the workflow page",
		chromedp.Navigate(f.url+"/#/workflows/thr-1"),
		waitFor(`document.querySelector('#wf-priority')?.dataset.priority === '5'`),
		waitFor(`!!document.querySelector('[data-step="fetch"] .flow-concurrency')`),
		waitFor(`document.querySelector('[data-step="fetch"] .flow-concurrency').dataset.key === '{{ .input.tenant }}' && `+
			textOf(`[data-step="fetch"] .flow-concurrency`)+`.includes('2 at once')`),
		waitFor(`document.querySelector('[data-step="notify"] .flow-rate')?.dataset.key === 'mail' && `+
			textOf(`[data-step="notify"] .flow-rate`)+`.includes('5/s, burst 10')`),
		waitFor(`!document.querySelector('[data-step="fetch"] .flow-rate') && !document.querySelector('[data-step="notify"] .flow-concurrency') && `+
			`!document.querySelector('[data-step="plain"] .flow-rate, [data-step="plain"] .flow-concurrency')`),
	)
	b.checkNoErrors()
}
