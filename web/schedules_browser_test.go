package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

// TestDashboardSchedules: the schedules page lists each schedule with its
// next fire times and paused state, and links to the instances it started.
func TestDashboardSchedules(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	a := b.tab()
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "thumbnail", []byte(thumbnailDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.client.PutSchedule(ctx, "nightly", httpapi.PutScheduleRequest{Definition: "thumbnail", Cron: "30 2 * * *", Timezone: "Europe/Paris"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.client.PutSchedule(ctx, "hourly", httpapi.PutScheduleRequest{Definition: "thumbnail", Cron: "@hourly", Paused: true}); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	if _, err := f.client.BackfillSchedule(ctx, "nightly", day, day.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	row := func(name string) string {
		return `document.querySelector('#schedule-table tr[data-name="` + name + `"]')`
	}
	b.run(a, "list the schedules",
		chromedp.Navigate(f.url+"/#/schedules"),
		waitFor(row("nightly")+` && `+row("hourly")),
		waitFor(row("nightly")+`.querySelectorAll('.next-fires li').length === 3`),
		waitFor(row("nightly")+`.querySelector('.next-fires li').textContent.includes(':30:00Z')`),
		waitFor(row("nightly")+`.querySelector('.next-fires li').textContent.includes('02:30')`),
		waitFor(row("hourly")+`.querySelector('.schedule-state').textContent === 'PAUSED'`),
		waitFor(row("nightly")+`.querySelector('.schedule-state').textContent === 'active'`),
	)
	b.shot(a, "schedules")
	b.run(a, "open the instances of a schedule",
		chromedp.Click(`#schedule-table tr[data-name="nightly"] a.instances-link`, chromedp.ByQuery),
		waitFor(`location.hash.startsWith('#/workflows?search=nightly-')`),
		waitFor(`!!document.querySelector('tr[data-id="nightly-20261120T013000Z"]')`),
	)
	b.checkNoErrors()
}
