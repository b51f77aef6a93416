package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

// swInterpreterState is the "sw" key of a Serverless Workflow instance's
// state as the interpreter writes it: two pending items and, once faulted,
// the DSL error.
const swInterpreterState = `{"sw": {
  "seq": 3,
  "context": {},
  "pending": {
    "sw-3": {"id": "sw-3", "kind": "listen", "pointer": "/do/1/waitForPayment", "event": "com.example.paid", "key": "order-7"},
    "sw-2": {"id": "sw-2", "kind": "call", "pointer": "/do/0/tryCharge/try/0/charge", "handler": "charge-card"}
  },
  "error": {"type": "https://serverlessworkflow.io/spec/1.0.0/errors/communication", "status": 503,
    "title": "Service Unavailable", "detail": "the card processor answered 503", "instance": "/do/0/tryCharge/try/0/charge"}
}}`

// The workflow page of an instance whose state has an "sw" object shows the
// Serverless Workflow panel: each pending item as its task's pointer and
// kind, and, once the instance FAILED, the DSL error field by field. (The
// instance here is a free-form one carrying such a state; the panel reads
// nothing else.)
func TestDashboardServerlessWorkflowPanel(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "sw-1", State: json.RawMessage(swInterpreterState)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Transition(ctx, "sw-1", workflow.StatusPending, workflow.StatusRunning); err != nil {
		t.Fatal(err)
	}
	tab := b.tab()
	item := func(id string) string { return `document.querySelector('#sw-pending [data-item="` + id + `"]')` }
	b.run(tab, "open the running instance",
		chromedp.Navigate(f.url+"/#/workflows/sw-1"),
		waitFor(`document.querySelectorAll('#sw-pending .sw-item').length === 2`),
		waitFor(textOf("#wf-sw-pending-count")+` === '2 items'`),
		// In the order the interpreter created them.
		waitFor(`[...document.querySelectorAll('#sw-pending .sw-item')].map((e) => e.dataset.item).join() === 'sw-2,sw-3'`),
		waitFor(item("sw-2")+`.dataset.pointer === '/do/0/tryCharge/try/0/charge' && `+item("sw-2")+`.dataset.kind === 'call'`),
		waitFor(item("sw-2")+`.textContent.includes('handler charge-card')`),
		waitFor(item("sw-3")+`.textContent.includes('/do/1/waitForPayment') && `+item("sw-3")+`.textContent.includes('event com.example.paid · key order-7')`),
		// Running: no error shown, and no empty "Steps" card.
		waitFor(`document.querySelector('#sw-error') === null`),
		waitFor(`document.querySelector('#wf-steps').hidden`),
	)
	b.shot(tab, "workflow-serverless-running")
	if _, err := f.client.Transition(ctx, "sw-1", workflow.StatusRunning, workflow.StatusFailed); err != nil {
		t.Fatal(err)
	}
	field := func(name string) string { return textOf(`#sw-error [data-field="` + name + `"]`) }
	b.run(tab, "the FAILED instance shows its error",
		waitFor(`document.querySelector('#wf-status')?.dataset.status === 'FAILED'`),
		waitFor(field("type")+` === 'https://serverlessworkflow.io/spec/1.0.0/errors/communication'`),
		waitFor(field("status")+` === '503'`),
		waitFor(field("title")+` === 'Service Unavailable'`),
		waitFor(field("detail")+` === 'the card processor answered 503'`),
		waitFor(field("instance")+` === '/do/0/tryCharge/try/0/charge'`),
	)
	b.shot(tab, "workflow-serverless-failed")
	b.checkNoErrors()
}

const greetSWDocument = `document:
  dsl: '1.0.0'
  namespace: examples
  name: greet
  version: '0.1.0'
do:
  - sayHello:
      set:
        greeting: ${ "Hello, " + .name }
  - notify:
      call: send-greeting
      with:
        text: ${ .greeting }
`

// The definition page of a Serverless Workflow document shows its
// document fields, its tasks with their kinds and pointers, and the
// document; the list counts its tasks. (This needs a server that takes
// Serverless Workflow documents.)
func TestDashboardServerlessWorkflowDefinition(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	if _, _, err := f.client.PutDefinition(t.Context(), "greet", []byte(greetSWDocument)); err != nil {
		t.Fatal(err)
	}
	tab := b.tab()
	task := func(name string) string { return `#def-sw-tasks tr[data-task="` + name + `"]` }
	b.run(tab, "open the definition",
		chromedp.Navigate(f.url+"/#/definitions/greet"),
		waitFor(textOf("#def-kind")+` === 'Serverless Workflow'`),
		waitFor(textOf("#sw-dsl")+` === '1.0.0' && `+textOf("#sw-namespace")+` === 'examples' && `+textOf("#sw-version")+` === '0.1.0'`),
		waitFor(textOf(task("sayHello")+` td:nth-child(2)`)+` === 'set' && `+textOf(task("sayHello")+` td:nth-child(3)`)+` === '/do/0/sayHello'`),
		waitFor(textOf(task("sayHello")+` td:nth-child(4)`)+` === 'greeting'`),
		waitFor(textOf(task("notify")+` td:nth-child(4)`)+` === 'handler send-greeting' && `+textOf(task("notify")+` td:nth-child(3)`)+` === '/do/1/notify'`),
		waitFor(textOf("#def-json")+`.includes('"send-greeting"')`),
	)
	b.shot(tab, "definition-serverless")
	b.run(tab, "the list counts its tasks",
		chromedp.Navigate(f.url+"/#/definitions"),
		waitFor(textOf(`#def-table tr[data-name="greet"] td:nth-child(3)`)+` === '2'`),
	)
	b.checkNoErrors()
}

// A Serverless Workflow instance whose handler fails ends FAILED, and its
// page shows the runtime error at the call task's pointer. (This needs the
// engine to run Serverless Workflow documents.)
func TestDashboardServerlessWorkflowFault(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	ctx := t.Context()
	doc := "document: {dsl: '1.0.0', namespace: shop, name: charge, version: '1.0.0'}\ndo:\n  - chargeCard:\n      call: fail\n      with: {amount: 3}\n"
	if _, _, err := f.client.PutDefinition(ctx, "charge", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "charge-1", Definition: "charge", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	field := func(name string) string { return textOf(`#sw-error [data-field="` + name + `"]`) }
	tab := b.tab()
	b.run(tab, "the faulted instance",
		chromedp.Navigate(f.url+"/#/workflows/charge-1"),
		waitFor(`document.querySelector('#wf-status')?.dataset.status === 'FAILED'`),
		waitFor(field("type")+` === 'https://serverlessworkflow.io/spec/1.0.0/errors/runtime'`),
		waitFor(field("status")+` === '500'`),
		waitFor(field("instance")+` === '/do/0/chargeCard'`),
		waitFor(field("detail")+`.includes('upstream answered 503')`),
		waitFor(`document.querySelector('#sw-pending-none') !== null`),
		// Such an instance cannot be retried; it can be deleted.
		waitFor(`document.querySelector('#btn-retry') === null && document.querySelector('#btn-delete') !== null`),
	)
	b.shot(tab, "workflow-serverless-fault")
	b.checkNoErrors()
}
