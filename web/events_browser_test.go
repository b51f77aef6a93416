package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

const paymentDefinition = `name: payment
steps:
  - {id: paid, type: wait, event: payment, key: "order-{{ .input.order }}"}
  - {id: shipped, type: wait, depends_on: [paid]}
`

// A waiting step shows the event it waits for, with its key as rendered;
// once the event came, the step says which event completed it.
func TestDashboardShowsTheEventAStepWaitsFor(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "payment", []byte(paymentDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "pay-1", Definition: "payment", Input: json.RawMessage(`{"order": 77}`)}); err != nil {
		t.Fatal(err)
	}
	tab := b.tab()
	paid := `#step-paid .step-event`
	b.run(tab, "open the waiting workflow",
		chromedp.Navigate(f.url+"/#/workflows/pay-1"),
		waitFor(textOf(paid)+` === 'waiting for event payment · key order-77'`),
		waitFor(`!document.querySelector('#step-shipped .step-event')`),
	)
	if _, err := f.client.PublishEvent(ctx, "payment", "order-77", json.RawMessage(`{"amount": 3}`)); err != nil {
		t.Fatal(err)
	}
	b.run(tab, "the event completes the step",
		waitFor(textOf(paid)+` === 'completed by event payment · key order-77'`),
		waitFor(`document.querySelector('#step-paid')?.dataset.status === 'COMPLETED'`),
	)
	b.checkNoErrors()
}
