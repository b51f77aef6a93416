package apitest

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// testSearch checks search attributes over HTTP: a definition's are
// rendered from the input when an instance starts, a start's own override
// them (free-form instances take them too), an instance shows them, and
// GET /v1/workflows filters by search.NAME (ANDed) and by creation and
// update times, paging; every mistake is a 400 that names what is wrong.
func testSearch(t *testing.T, newServer NewServer) {
	a := &api{t: t, url: newServer(t)}
	r := a.do("PUT", "/v1/definitions/bad", "name: bad\nsearch: {Customer: x, tier: {a: 1}, who: '{{ .steps.x.output }}'}\nsteps:\n  - {id: w, type: wait}\n")
	expect(t, r, 400, "invalid search block")
	for _, want := range []string{"search.Customer", "search.tier", "search.who"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("invalid search block: %s does not name %s", r.body, want)
		}
	}
	expect(t, a.do("PUT", "/v1/definitions/order",
		"name: order\nsearch: {customer: '{{ .input.customer }}', amount: '{{ .input.amount }}', kind: order, region: '{{ .input.region }}'}\nsteps:\n  - {id: w, type: wait}\n"), 201, "definition")
	start := func(body string) map[string]any {
		t.Helper()
		r := a.do("POST", "/v1/workflows", body)
		expect(t, r, 201, "start "+body)
		return r.instance(t)
	}
	before := time.Now().Add(-time.Second)
	o1 := start(`{"id":"o1","definition":"order","input":{"customer":"acme","amount":42,"region":"eu"}}`)
	if got, _ := json.Marshal(o1["search"]); string(got) != `{"amount":42,"customer":"acme","kind":"order","region":"eu"}` {
		t.Errorf("o1's search = %s", got)
	}
	// The start's own attributes override the definition's; an input
	// without the region leaves it out.
	o2 := start(`{"id":"o2","definition":"order","input":{"customer":"acme","amount":7},"search":{"amount":8,"vip":true}}`)
	if got, _ := json.Marshal(o2["search"]); string(got) != `{"amount":8,"customer":"acme","kind":"order","vip":true}` {
		t.Errorf("o2's search = %s", got)
	}
	start(`{"id":"o3","definition":"order","input":{"customer":"globex","amount":42}}`)
	start(`{"id":"f1","search":{"customer":"acme"}}`)
	var got map[string]any
	a.do("GET", "/v1/workflows/o2", "").json(t, &got)
	if b, _ := json.Marshal(got["search"]); string(b) != `{"amount":8,"customer":"acme","kind":"order","vip":true}` {
		t.Errorf("GET o2: search = %s", b)
	}
	list := func(query string) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("paging does not end")
			}
			r := a.do("GET", "/v1/workflows?limit=1&"+query+"&cursor="+url.QueryEscape(cursor), "")
			expect(t, r, 200, "list "+query)
			var page httpapi.ListWorkflowsResponse
			r.json(t, &page)
			for _, w := range page.Workflows {
				ids = append(ids, w.ID)
				if len(w.Search) == 0 {
					t.Errorf("list %s: %s without its search attributes", query, w.ID)
				}
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		slices.Sort(ids)
		return ids
	}
	after := url.QueryEscape(before.UTC().Format(time.RFC3339Nano))
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	for query, want := range map[string][]string{
		"search.customer=acme":                           {"f1", "o1", "o2"},
		"search.customer=acme&search.amount=42":          {"o1"},
		"search.amount=42":                               {"o1", "o3"},
		"search.vip=true":                                {"o2"},
		"search.customer=acme&definition=order":          {"o1", "o2"},
		"search.region=eu&search.kind=order":             {"o1"},
		"search.customer=nobody":                         nil,
		"search.customer=acme&created_after=" + after:    {"f1", "o1", "o2"},
		"search.customer=acme&created_before=" + after:   nil,
		"created_before=" + future + "&search.amount=42": {"o1", "o3"},
		"updated_before=" + after:                        nil,
		"updated_before=" + future + "&definition=order": {"o1", "o2", "o3"},
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("list %s = %v, want %v", query, got, want)
		}
	}
	for q, names := range map[string]string{
		"search.Customer=x":                    "search.Customer",
		"search.=x":                            "search.",
		"search.a=1&search.a=2":                "search.a",
		"created_after=yesterday":              "created_after",
		"created_before=2026-13-01":            "created_before",
		"updated_before=1700000000":            "updated_before",
		"search.a=" + strings.Repeat("x", 513): "search value",
	} {
		r := a.do("GET", "/v1/workflows?"+q, "")
		expect(t, r, 400, "list "+q[:min(len(q), 40)])
		if !strings.Contains(string(r.body), names) {
			t.Errorf("list %s: %s does not name %s", q[:min(len(q), 40)], r.body, names)
		}
	}
	for body, names := range map[string]string{
		`{"search":{"Bad":1}}`:                                "search",
		`{"search":{"a":{"x":1}}}`:                            "string, a number or a boolean",
		`{"search":{"a":null}}`:                               "string, a number or a boolean",
		`{"definition":"order","input":{"customer":{"x":1}}}`: "customer",
		`{"definition":"order","input":{"customer":"` + strings.Repeat("x", 513) + `"}}`: "customer",
	} {
		r := a.do("POST", "/v1/workflows", body)
		expect(t, r, 400, "start "+body[:min(len(body), 60)])
		if !strings.Contains(string(r.body), names) {
			t.Errorf("start %s: %s does not name %s", body[:min(len(body), 60)], r.body, names)
		}
	}
	// A schedule's fire renders them from the schedule's input.
	expect(t, a.do("PUT", "/v1/schedules/nightly-order", `{"definition": "order", "cron": "0 3 * * *", "input": {"customer": "initech", "amount": 5}}`), 201, "schedule")
	r = a.do("POST", "/v1/schedules/nightly-order/trigger", "")
	expect(t, r, 201, "trigger")
	if got, _ := json.Marshal(r.instance(t)["search"]); string(got) != `{"amount":5,"customer":"initech","kind":"order"}` {
		t.Errorf("a scheduled instance's search = %s", got)
	}
}
