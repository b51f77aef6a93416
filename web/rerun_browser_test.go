package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/workflow"
)

// A step of a finished workflow has "Re-run from here…": it asks first,
// then starts the re-run and goes to it; the re-run links to its original,
// which lists it among its re-runs. A workflow that still runs offers no
// re-run.
func TestDashboardRerunFromStep(t *testing.T) {
	t.Parallel()
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowser(t)
			f := newFixtureOn(t, s.open)
			tab := b.tab()
			ctx := t.Context()
			def := "name: review\nsteps:\n  - {id: draft, type: wait}\n  - {id: approve, type: wait, depends_on: [draft]}\n"
			if _, _, err := f.client.PutDefinition(ctx, "review", []byte(def)); err != nil {
				t.Fatal(err)
			}
			if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "review-1", Definition: "review"}); err != nil {
				t.Fatal(err)
			}
			for v, step := range []string{"draft", "approve"} {
				if _, err := f.client.CompleteStep(ctx, "review-1", step, `"`+string(rune('0'+v))+`"`, json.RawMessage(`{"by":"ada"}`)); err != nil {
					t.Fatal(err)
				}
			}
			f.waitFor(t, "review-1 completed", "review-1", func(w *workflow.Instance) bool { return w.Status == workflow.StatusCompleted })

			b.run(tab, "a finished workflow's steps offer a re-run, which asks first",
				chromedp.Navigate(f.url+"/#/workflows/review-1"),
				waitFor(`document.querySelector('#step-approve')?.dataset.status === 'COMPLETED'`),
				waitFor(`document.querySelectorAll('[data-rerun-step]').length === 2`),
				chromedp.Evaluate(`document.querySelector('[data-rerun-step="approve"]').click()`, nil),
				waitFor(textOf("#rerun-confirm-approve")+`.includes('runs step approve and everything after it again')`),
			)
			b.shot(tab, "rerun-confirm")
			b.run(tab, "confirming starts the re-run and goes to it",
				chromedp.Click("#btn-rerun-confirm", chromedp.ByID),
				waitFor(`location.hash.startsWith('#/workflows/') && location.hash !== '#/workflows/review-1'`),
				waitFor(`document.querySelector('#wf-rerun-of[data-rerun-of="review-1"]') !== null`),
				waitFor(`document.querySelector('#step-draft')?.dataset.status === 'COMPLETED'`),
				waitFor(`document.querySelector('#step-approve')?.dataset.status === 'WAITING'`),
				// It runs: no re-run of it yet.
				waitFor(`document.querySelectorAll('[data-rerun-step]').length === 0`),
			)
			b.shot(tab, "rerun-new")
			var rerunID string
			b.run(tab, "the re-run's id", chromedp.Evaluate(`document.querySelector('#wf-id').textContent`, &rerunID))
			got, err := f.client.GetWorkflow(ctx, rerunID)
			if err != nil || got.RerunOf != "review-1" || got.State.Steps["approve"].Status != workflow.StepWaiting {
				t.Fatalf("the re-run the page started: %+v, %v", got, err)
			}
			b.run(tab, "the re-run links back, and the original lists it",
				chromedp.Evaluate(`document.querySelector('#wf-rerun-of').click()`, nil),
				waitFor(`location.hash === '#/workflows/review-1'`),
				waitFor(`document.querySelector('#wf-reruns a[data-rerun="`+rerunID+`"]') !== null`),
			)
			b.shot(tab, "rerun-original")
			b.run(tab, "a re-run's link leads to it",
				chromedp.Evaluate(`document.querySelector('#wf-reruns a').click()`, nil),
				waitFor(`location.hash === '#/workflows/`+rerunID+`' && document.querySelector('#wf-id')?.textContent === '`+rerunID+`'`),
			)
			b.checkNoErrors()
		})
	}
}

// A code workflow's recorded entries have "Re-run from here…" once it has
// finished: the re-run keeps the entries before that seq.
func TestDashboardRerunCodeWorkflowFromEntry(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	f := newFixture(t)
	tab := b.tab()
	ctx := t.Context()
	if _, _, err := f.client.PutDefinition(ctx, "shop", []byte(shopDefinition)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CreateWorkflow(ctx, httpapi.CreateWorkflowRequest{ID: "shop-9", Definition: "shop"}); err != nil {
		t.Fatal(err)
	}
	run := pollRun(t, f, "shop-9", 1)
	for _, name := range []string{"pick", "pack"} {
		if _, err := f.client.Checkpoint(ctx, run.TaskID, name, httpapi.CheckpointRequest{Lease: run.Lease, Output: json.RawMessage(`"` + name + `ed"`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.client.CompleteTask(ctx, run.TaskID, run.Lease, json.RawMessage(`"shipped"`)); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "shop-9 completed", "shop-9", func(w *workflow.Instance) bool { return w.Status == workflow.StatusCompleted })
	b.run(tab, "a finished code workflow's entries offer a re-run from their seq",
		chromedp.Navigate(f.url+"/#/workflows/shop-9"),
		waitFor(`document.querySelectorAll('#code-timeline [data-rerun-step]').length === 2`),
		chromedp.Evaluate(`document.querySelector('[data-rerun-step="pack"]').click()`, nil),
		waitFor(textOf("#rerun-confirm-pack")+`.includes('runs #2 pack and everything after it again')`),
		chromedp.Click("#btn-rerun-confirm", chromedp.ByID),
		waitFor(`location.hash.startsWith('#/workflows/') && location.hash !== '#/workflows/shop-9'`),
		waitFor(`document.querySelector('#wf-rerun-of[data-rerun-of="shop-9"]') !== null`),
		waitFor(`document.querySelector('#step-pick')?.dataset.seq === '1'`),
	)
	b.shot(tab, "rerun-code")
	var id string
	b.run(tab, "the re-run's id", chromedp.Evaluate(`document.querySelector('#wf-id').textContent`, &id))
	got, err := f.client.GetWorkflow(ctx, id)
	if err != nil || got.RerunOf != "shop-9" || got.State.Steps["pick"] == nil || got.State.Steps["pack"] != nil {
		t.Fatalf("the re-run from #2: %+v, %v", got, err)
	}
	b.checkNoErrors()
}
