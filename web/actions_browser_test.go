package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// TestDashboardActs, on both stores: the dashboard starts a workflow (from
// the list and, preselected, from a definition's page), checks the input
// before sending it and shows the server's refusal in the form; it
// publishes an event and says how many waiting steps took it; it lists the
// workers, live and stale, with the tasks each holds.
func TestDashboardActs(t *testing.T) {
	t.Parallel()
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowser(t)
			f := newFixtureOn(t, s.open)
			tab := b.tab()
			testStartWorkflow(t, b, f, tab)
			testPublishEvent(t, b, f, tab)
			testWorkersPage(t, b, f, tab, s.name)
			b.checkNoErrors()
		})
	}
}

func testStartWorkflow(t *testing.T, b *browser, f *fixture, tab context.Context) {
	t.Helper()
	b.run(tab, "the list leads to the start form",
		chromedp.Navigate(f.url+"/#/workflows"),
		waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
		chromedp.Click("#btn-start-workflow", chromedp.ByID),
		waitFor(`location.hash === '#/start'`),
		waitFor(`[...document.querySelectorAll('#start-definition option')].map(o => o.value).join() === ',nightly-report,order,welcome-email'`),
	)
	b.shot(tab, "start-form")

	// Input that is not JSON, or not an object, is refused before sending.
	b.run(tab, "the input is checked in the page",
		setValue("#start-definition", "order"),
		setValue("#start-id", "order-2001"),
		setValue("#start-input", `{"sku": "C-3",`),
		chromedp.Click("#btn-start-submit", chromedp.ByID),
		waitFor(textOf("#start-input-error")+`.startsWith('Not valid JSON')`),
		setValue("#start-input", `["C-3"]`),
		chromedp.Click("#btn-start-submit", chromedp.ByID),
		waitFor(textOf("#start-input-error")+` === 'Must be a JSON object ({…}), not an array.'`),
		waitFor(`location.hash === '#/start'`),
	)
	if _, err := f.client.GetWorkflow(t.Context(), "order-2001"); !errors.Is(err, httpapi.ErrNotFound) {
		t.Fatalf("a refused input was sent: GET order-2001 = %v", err)
	}
	b.run(tab, "start order-2001",
		setValue("#start-input", `{"sku": "C-3", "qty": 1, "amount": 5}`),
		waitFor(textOf("#start-input-error")+` === ''`),
		chromedp.Click("#btn-start-submit", chromedp.ByID),
		waitFor(`location.hash === '#/workflows/order-2001'`),
		waitFor(textOf("#wf-status")+` === 'RUNNING'`),
		waitFor(`document.querySelector('#step-approve')?.dataset.status === 'WAITING'`),
	)
	w := f.get(t, "order-2001")
	var input map[string]any
	if err := json.Unmarshal(w.Input, &input); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"sku": "C-3", "qty": 1.0, "amount": 5.0}; w.Definition != "order" || !cmp.Equal(input, want) {
		t.Errorf("order-2001: definition %q, input %s", w.Definition, w.Input)
	}

	// The same id again: the server's 409 is shown in the form.
	b.run(tab, "an id in use is refused in place",
		chromedp.Navigate(f.url+"/#/start?definition=order"),
		waitFor(`document.getElementById('start-definition')?.value === 'order'`),
		setValue("#start-id", "order-2001"),
		chromedp.Click("#btn-start-submit", chromedp.ByID),
		waitFor(`document.querySelector('#start-answer .form-refusal')?.dataset.status === '409'`),
		waitFor(textOf("#start-answer")+`.includes('409 Conflict')`),
		waitFor(`location.hash === '#/start?definition=order'`),
	)
	b.shot(tab, "start-form-refused")

	// From a definition's page the form opens with it picked; without an
	// id the server makes one.
	b.run(tab, "start from a definition's page",
		chromedp.Navigate(f.url+"/#/definitions/welcome-email"),
		waitFor(`!!document.querySelector('#btn-start-workflow')`),
		chromedp.Click("#btn-start-workflow", chromedp.ByID),
		waitFor(`location.hash === '#/start?definition=welcome-email'`),
		waitFor(`document.getElementById('start-definition')?.value === 'welcome-email'`),
		setValue("#start-input", `{"email": "grace@example.com"}`),
		chromedp.Click("#btn-start-submit", chromedp.ByID),
		waitFor(`location.hash.startsWith('#/workflows/') && `+textOf("#wf-status")+` === 'COMPLETED'`),
		waitFor(textOf("#wf-input")+`.includes('grace@example.com')`),
	)
}

func testPublishEvent(t *testing.T, b *browser, f *fixture, tab context.Context) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "payment", []byte(paymentDefinition)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pay-1", "pay-2"} {
		if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: id, Definition: "payment", Input: json.RawMessage(`{"order": 77}`)}); err != nil {
			t.Fatal(err)
		}
		f.waitFor(t, id+" waiting", id, func(w *workflow.Instance) bool { return w.State.Steps["paid"].Status == workflow.StepWaiting })
	}
	b.run(tab, "the name and the data are checked in the page",
		chromedp.Navigate(f.url+"/#/events"),
		waitFor(`!!document.getElementById('event-form')`),
		setValue("#event-name", "pay ment"),
		waitFor(textOf("#event-name-error")+`.includes('1–128 characters')`),
		setValue("#event-name", "payment"),
		setValue("#event-data", `{"amount": }`),
		chromedp.Click("#btn-event-submit", chromedp.ByID),
		waitFor(textOf("#event-data-error")+`.startsWith('Not valid JSON')`),
		waitFor(`!document.querySelector('#event-answer .event-result')`),
	)
	b.run(tab, "publish: two waiting steps take it",
		setValue("#event-key", "order-77"),
		setValue("#event-data", `{"amount": 3}`),
		chromedp.Click("#btn-event-submit", chromedp.ByID),
		waitFor(`document.querySelector('#event-answer .event-result')?.dataset.delivered === '2'`),
		waitFor(textOf("#event-took")+` === '2 waiting steps took it:'`),
		waitFor(`[...document.querySelectorAll('#event-delivered a')].map(a => a.textContent).sort().join() === 'pay-1,pay-2'`),
	)
	b.shot(tab, "events-published")
	for _, id := range []string{"pay-1", "pay-2"} {
		w := f.waitFor(t, id+" paid", id, func(w *workflow.Instance) bool { return w.State.Steps["paid"].Status == workflow.StepCompleted })
		if got := string(w.State.Steps["paid"].Output); got != `{"amount":3}` {
			t.Errorf("%s: paid output %s", id, got)
		}
	}
	b.run(tab, "publish again: nobody waits, it is kept",
		chromedp.Click("#btn-event-submit", chromedp.ByID),
		waitFor(`document.querySelector('#event-answer .event-result')?.dataset.delivered === '0'`),
		waitFor(textOf("#event-took")+` === 'No step was waiting for it now.'`),
		waitFor(textOf("#event-answer")+`.includes('stays stored')`),
		// A server-side refusal is shown in place too: a key too long.
		chromedp.Evaluate(`document.getElementById('event-key').value = 'k'.repeat(300)`, nil),
		chromedp.Click("#btn-event-submit", chromedp.ByID),
		waitFor(textOf("#event-name-error")+` === 'The key has 300 characters, more than 256.'`),
	)
}

func testWorkersPage(t *testing.T, b *browser, f *fixture, tab context.Context, storeName string) {
	t.Helper()
	ctx := t.Context()
	// A remote worker polls now; another last polled two minutes ago
	// (still listed: five minutes; stale: over one).
	// It holds the resize task of thumb-1: one task in flight.
	if _, _, err := f.client.PutDefinition(ctx, "thumbnail", []byte(thumbnailDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "thumb-1", Definition: "thumbnail", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	wait := 5.0
	if task, err := f.client.PollTask(ctx, httpapi.PollRequest{Worker: "resizer-1", Handlers: []string{"resize", "thumbnail"}, WaitSeconds: &wait}); err != nil || task == nil || task.WorkflowID != "thumb-1" {
		t.Fatalf("poll as resizer-1: %+v, %v", task, err)
	}
	old := store.WorkerRecord{Worker: "mailer-old", Node: "node-b", Handlers: []string{"send-mail"}, LastPollAt: time.Now().Add(-2 * time.Minute)}
	if err := f.st.RecordWorker(ctx, old); err != nil {
		t.Fatal(err)
	}
	row := func(worker string) string {
		return `document.querySelector('#workers-table tr[data-worker="` + worker + `"]')`
	}
	b.run(tab, "the workers page",
		chromedp.Navigate(f.url+"/#/workflows"),
		chromedp.Click(`a[data-nav="workers"]`, chromedp.ByQuery),
		waitFor(`location.hash === '#/workers'`),
		waitFor(row("resizer-1")+`?.dataset.state === 'live'`),
		waitFor(`[...`+row("resizer-1")+`.querySelectorAll('.handler')].map(e => e.textContent).join() === 'resize,thumbnail'`),
		waitFor(`+`+textOf(`#workers-table tr[data-worker="resizer-1"] .in-flight`)+` === 1`),
		waitFor(row("mailer-old")+`?.dataset.state === 'stale'`),
		waitFor(`+`+textOf(`#workers-table tr[data-worker="mailer-old"] .in-flight`)+` === 0`),
		waitFor(row("mailer-old")+`.textContent.includes('2m ago') && `+row("mailer-old")+`.textContent.includes('node-b')`),
		// The node's in-process pool polls for echo and fail.
		waitFor(`[...document.querySelectorAll('#workers-table tr[data-state="live"]')].some(tr => tr.textContent.includes('in-process') && tr.textContent.includes('echo'))`),
		waitFor(textOf("#workers-summary")+` === '2 live, 1 stale.'`),
	)
	b.shot(tab, "workers-"+storeName)
}

// With a reader's token, starting a workflow and publishing an event are
// refused (403), and the form says the token may not.
func TestDashboardActsWithReadersToken(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t, "admin-t0ken admin root", "reader-t0ken reader auditor")
	tab := b.tab()
	b.run(tab, "a reader's token",
		chromedp.Navigate(f.url+"/#/start?definition=order"),
		waitFor(`!document.getElementById('auth').hidden`),
		chromedp.SendKeys("#token-input", "reader-t0ken"+kb.Enter, chromedp.ByID),
		waitFor(`document.getElementById('auth').hidden && document.getElementById('start-definition')?.value === 'order'`),
		setValue("#start-id", "order-3001"),
		chromedp.Click("#btn-start-submit", chromedp.ByID),
		waitFor(`document.querySelector('#start-answer .form-refusal')?.dataset.status === '403'`),
		waitFor(textOf("#start-answer")+`.includes('not allowed with this token') && `+textOf("#start-answer")+`.includes('403 Forbidden')`),
		waitFor(textOf("#start-answer")+`.includes('admin or operator')`),
	)
	b.shot(tab, "start-form-reader")
	b.run(tab, "publishing is refused",
		chromedp.Navigate(f.url+"/#/events"),
		setValue("#event-name", "payment"),
		chromedp.Click("#btn-event-submit", chromedp.ByID),
		waitFor(`document.querySelector('#event-answer .form-refusal')?.dataset.status === '403'`),
		waitFor(textOf("#event-answer")+`.includes('not allowed with this token')`),
	)
	if _, err := f.client.GetWorkflow(t.Context(), "order-3001"); !errors.Is(err, httpapi.ErrNotFound) {
		t.Errorf("a reader's start created order-3001: %v", err)
	}
	b.checkNoErrors()
}
