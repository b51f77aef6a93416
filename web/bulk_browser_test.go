package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

// TestDashboardBulk, on both stores: the workflows page links to the bulk
// page with its filter; the page counts the matches and asks before
// acting, refuses an empty filter, then follows the operation to its end,
// which changed the matches and nothing else.
func TestDashboardBulk(t *testing.T) {
	t.Parallel()
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowser(t)
			f := newFixtureOn(t, s.open)
			tab := b.tab()
			ctx := t.Context()
			for i := range 5 {
				if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: fmt.Sprintf("bulkdemo-%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "bystander-1"}); err != nil {
				t.Fatal(err)
			}
			b.run(tab, "the list's filter goes to the bulk page",
				chromedp.Navigate(f.url+"/#/workflows?status=PENDING"),
				waitFor(`!!document.querySelector('#wf-table tr[data-id="bulkdemo-0"]')`),
				chromedp.Click("#bulk-link", chromedp.ByID),
				waitFor(`location.hash === '#/bulk?status=PENDING'`),
				waitFor(`document.getElementById('bulk-status').value === 'PENDING'`),
			)
			b.run(tab, "an empty filter and a bad search attribute are refused in the page",
				setValue("#bulk-status", ""),
				chromedp.Click("#bulk-count", chromedp.ByID),
				waitFor(textOf("#bulk-problem")+`.includes('Choose at least one filter')`),
				setValue("#bulk-search", "tier"),
				chromedp.Click("#bulk-count", chromedp.ByID),
				waitFor(textOf("#bulk-problem")+`.includes('write NAME=VALUE')`),
				setValue("#bulk-search", ""),
			)
			b.run(tab, "count, then confirm",
				setValue("#bulk-status", "PENDING"),
				setValue("#bulk-id-prefix", "bulkdemo-"),
				setValue("#bulk-action", "cancel"),
				chromedp.Click("#bulk-count", chromedp.ByID),
				waitFor(textOf("#bulk-confirm-text")+` === 'cancel 5 workflows matching status=PENDING id_prefix=bulkdemo-?'`),
			)
			b.shot(tab, "bulk-confirm")
			b.run(tab, "the operation is followed to its end",
				chromedp.Click("#bulk-go", chromedp.ByID),
				waitFor(`document.getElementById('bulk-followed')?.dataset.status === 'DONE'`),
				waitFor(textOf("#bulk-counts")+` === '5 matched: 5 done, 0 skipped, 0 failed'`),
				waitFor(`document.getElementById('bulk-confirm').hidden`),
				waitFor(`document.querySelectorAll('#bulk-table tbody tr[data-id]').length === 1`),
				chromedp.Evaluate(`document.getElementById('banners').replaceChildren()`, nil),
			)
			b.shot(tab, "bulk-done")
			for i := range 5 {
				if w := f.get(t, fmt.Sprintf("bulkdemo-%d", i)); w.Status != "CANCELLED" {
					t.Errorf("bulkdemo-%d is %s", i, w.Status)
				}
			}
			if w := f.get(t, "bystander-1"); w.Status != "PENDING" || w.Version != 0 {
				t.Errorf("bystander-1, not matched, is %s at version %d", w.Status, w.Version)
			}
			b.checkNoErrors()
		})
	}
}
