package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

// The workflow page of a control-flow instance: skipped steps are drawn as
// skipped (hollow, with the arrows into them not taken) and the instance's
// output is shown once it completes.
func TestDashboardSkippedStepsAndOutput(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "review", []byte(`
name: review
steps:
  - {id: check, type: task, handler: echo, input: {ok: true}}
  - {id: audit, type: task, handler: echo, depends_on: [check], when: '.input.audit'}
  - {id: archive, type: task, handler: echo, depends_on: [audit]}
  - {id: done, type: task, handler: echo, depends_on: [check, archive], join: any, input: {ok: "{{ .steps.check.output.ok }}"}}
output: {ok: "{{ .steps.done.output.ok }}", audited: "{{ .steps.audit.output }}"}
`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "review-1", Definition: "review", Input: json.RawMessage(`{"audit": false}`)}); err != nil {
		t.Fatal(err)
	}
	w := f.waitFor(t, "review-1 completed", "review-1", func(w *workflow.Instance) bool { return w.Status == workflow.StatusCompleted })
	if string(w.Output) != `{"audited":null,"ok":true}` {
		t.Fatalf("output %s", w.Output)
	}
	tab := b.tab()
	b.run(tab, "open review-1",
		chromedp.Navigate(f.url+"/#/workflows/review-1"),
		waitFor(textOf("#wf-status")+` === 'COMPLETED'`),
		waitFor(`document.querySelectorAll('#wf-steps svg.dag g.node.st-SKIPPED').length === 2`),
		waitFor(`!!document.querySelector('#wf-steps svg.dag g.node.st-SKIPPED[data-step="audit"]')`),
		waitFor(`getComputedStyle(document.querySelector('#wf-steps svg.dag g.node.st-SKIPPED rect')).strokeDasharray !== 'none'`),
		// The arrows into audit and archive are drawn as not taken.
		waitFor(`document.querySelectorAll('#wf-steps svg.dag path.edge.to-skipped').length === 2`),
		waitFor(`!!document.querySelector('#step-list > li[data-status="SKIPPED"]')`),
		waitFor(textOf("#wf-output")+`.includes('"audited"') && `+textOf("#wf-output")+`.includes('true')`),
	)
	b.shot(tab, "workflow-skipped-output")
	b.checkNoErrors()
}
