package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/flowd/flowd/workflow"
)

// With a reader's token the dashboard shows everything, the history says
// who wrote each version, and an action the role may not take is refused
// with a message that says so and names the roles that may.
func TestDashboardReaderToken(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t, "admin-t0ken admin root", "reader-t0ken reader auditor")
	tab := b.tab()
	b.run(tab, "a reader's token opens the list",
		chromedp.Navigate(f.url+"/"),
		waitFor(`!document.getElementById('auth').hidden`),
		chromedp.SendKeys("#token-input", "reader-t0ken"+kb.Enter, chromedp.ByID),
		waitFor(`document.getElementById('auth').hidden && document.querySelectorAll('#wf-table tbody tr[data-id]').length === 6`),
	)
	b.run(tab, "the history names the actors",
		chromedp.Navigate(f.url+"/#/workflows/order-1001"),
		waitFor(`[...document.querySelectorAll('#history .actor')].some(e => e.textContent === 'by root')`),
		waitFor(`[...document.querySelectorAll('#history .actor')].some(e => e.textContent === 'by engine')`),
	)
	b.shot(tab, "workflow-reader")
	b.run(tab, "pausing is refused",
		chromedp.Click("#btn-pause", chromedp.ByID),
		waitFor(`[...document.querySelectorAll('#banners .banner-error')].some(e =>
			e.textContent.includes('not allowed with this token') && e.textContent.includes('403 Forbidden') &&
			e.textContent.includes('role reader') && e.textContent.includes('admin or operator'))`),
	)
	b.shot(tab, "workflow-reader-refused")
	if w := f.get(t, "order-1001"); w.Status != workflow.StatusRunning {
		t.Errorf("order-1001 is %s after a reader's pause, want RUNNING", w.Status)
	}
	b.checkNoErrors()
}
