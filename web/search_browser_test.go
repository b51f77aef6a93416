package web_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

// TestDashboardFiltersBySearch, on both stores: the workflow list filters
// by search attributes (ANDed) and by creation time through its filter
// form; the filters are in the address, so a shared address opens the list
// filtered, and each can be removed; a bad attribute is refused in the
// form; the workflow page shows an instance's attributes, each a link to
// the list of the workflows with that value.
func TestDashboardFiltersBySearch(t *testing.T) {
	t.Parallel()
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowser(t)
			f := newFixtureOn(t, s.open)
			ctx := t.Context()
			for _, c := range []struct{ id, search string }{
				{"inv-1", `{"customer":"acme","region":"eu"}`},
				{"inv-2", `{"customer":"acme","region":"us","amount":42}`},
				{"inv-3", `{"customer":"globex","region":"eu"}`},
			} {
				var search map[string]json.RawMessage
				if err := json.Unmarshal([]byte(c.search), &search); err != nil {
					t.Fatal(err)
				}
				if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: c.id, Search: search}); err != nil {
					t.Fatal(err)
				}
			}
			tab := b.tab()
			rows := `[...document.querySelectorAll('#wf-table tbody tr[data-id]')].map(r => r.dataset.id).join()`
			b.run(tab, "filter by one attribute, then two",
				chromedp.Navigate(f.url+"/#/workflows"),
				waitFor(`document.querySelectorAll('#wf-table tbody tr[data-id]').length > 3`),
				chromedp.Evaluate(`document.getElementById('filter-box').open = true`, nil),
				setValue("#filter-where", "customer=acme"),
				chromedp.Click("#filter-apply", chromedp.ByID),
				waitFor(`location.hash === '#/workflows?search.customer=acme'`),
				waitFor(rows+` === 'inv-2,inv-1'`),
				waitFor(`!!document.querySelector('.chip[data-filter="search.customer"]')`),
				chromedp.Evaluate(`document.getElementById('filter-box').open = true`, nil),
				setValue("#filter-where", "customer=acme\nregion=eu"),
				chromedp.Click("#filter-apply", chromedp.ByID),
				waitFor(rows+` === 'inv-1'`),
			)
			b.shot(tab, "workflows-filtered-by-search")
			b.run(tab, "a bad attribute is refused in the form",
				setValue("#filter-where", "Customer=acme"),
				chromedp.Click("#filter-apply", chromedp.ByID),
				waitFor(textOf("#filter-error")+`.includes('“Customer=acme”')`),
				waitFor(rows+` === 'inv-1'`),
			)
			b.run(tab, "a filter is removed by its chip",
				chromedp.Click(`.chip[data-filter="search.region"] .chip-x`, chromedp.ByQuery),
				waitFor(rows+` === 'inv-2,inv-1'`),
			)
			future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			b.run(tab, "a shared address opens the list filtered, by time too",
				chromedp.Navigate(f.url+"/#/workflows?search.region=eu&created_after="+future),
				waitFor(textOf("#wf-table .empty-row")+` === 'No workflows match these filters.'`),
				waitFor(`!!document.querySelector('.chip[data-filter="created_after"]')`),
				chromedp.Navigate(f.url+"/#/workflows?search.region=eu&created_before="+future),
				waitFor(rows+` === 'inv-3,inv-1'`),
				chromedp.Navigate(f.url+"/#/workflows?search.amount=42"),
				waitFor(rows+` === 'inv-2'`),
			)
			b.run(tab, "the workflow page shows the attributes, each a link to its list",
				chromedp.Navigate(f.url+"/#/workflows/inv-2"),
				waitFor(textOf("#wf-search")+` === 'amount = 42customer = acmeregion = us'`),
			)
			b.shot(tab, "workflow-search-attributes")
			b.run(tab, "an attribute links to the list of its value",
				chromedp.Click(`#wf-search a[data-name="customer"]`, chromedp.ByQuery),
				waitFor(`location.hash === '#/workflows?search.customer=acme'`),
				waitFor(rows+` === 'inv-2,inv-1'`),
			)
			b.checkNoErrors()
		})
	}
}
