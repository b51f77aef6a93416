package web_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/httpapi"
)

// TestDashboardAPIReference: the API page renders every operation of the
// server's OpenAPI document, each opening on its parameters and responses,
// and a schema reference opens that schema.
func TestDashboardAPIReference(t *testing.T) {
	t.Parallel()
	doc, err := httpapi.OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		t.Fatal(err)
	}
	ops := 0
	for _, item := range parsed.Paths {
		for m := range item {
			if m != "parameters" {
				ops++
			}
		}
	}
	b := newBrowser(t)
	f := newFixture(t)
	a := b.tab()
	patch := `document.querySelector('.api-op[data-op="PATCH /v1/workflows/{id}"]')`
	b.run(a, "open the API page",
		chromedp.Navigate(f.url+"/#/api"),
		waitFor(`document.querySelectorAll('.api-op').length === `+strconv.Itoa(ops)),
		waitFor(`document.querySelector('[data-nav="api"]').classList.contains('active')`),
		waitFor(patch+` && !`+patch+`.open`),
	)
	b.shot(a, "api-reference")
	b.run(a, "open an operation and a schema it refers to",
		chromedp.Click(`.api-op[data-op="PATCH /v1/workflows/{id}"] > summary`, chromedp.ByQuery),
		waitFor(patch+`.open && `+patch+`.querySelector('.api-params').textContent.includes('If-Match')`),
		waitFor(patch+`.textContent.includes('412')`),
		chromedp.Click(`.api-op[data-op="PATCH /v1/workflows/{id}"] .api-response .api-ref`, chromedp.ByQuery),
		waitFor(`document.getElementById('schema-Instance').open`),
		waitFor(`document.getElementById('schema-Instance').textContent.includes('created_at')`),
	)
	b.checkNoErrors()
}
