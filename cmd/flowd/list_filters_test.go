package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
)

// TestCLIListWhere: `flowd list --where NAME=VALUE` (repeatable, ANDed),
// --since and --until (durations before now or RFC 3339 times) filter the
// list; the next page's command repeats them; `flowd get` shows an
// instance's search attributes; every mistake in them is a usage error
// (exit 2) that sends nothing.
func TestCLIListWhere(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	for _, c := range []struct{ id, search string }{
		{"order-1", `{"customer":"acme","tier":1}`},
		{"order-2", `{"customer":"globex","tier":1}`},
		{"order-3", `{"customer":"acme","tier":2,"vip":true}`},
		{"order-4", `{"customer":"acme","tier":1}`},
	} {
		var search map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.search), &search); err != nil {
			t.Fatal(err)
		}
		if _, err := b.client.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: c.id, Search: search}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	b.golden("list-where", 0, "", "list", "--where", "customer=acme")
	b.golden("list-where-two", 0, "", "list", "--where", "customer=acme", "--where", "tier=1")
	b.golden("list-where-page", 0, "", "list", "--where", "customer=acme", "--since", "1h", "--limit", "1")
	b.golden("list-since", 0, "", "list", "--since", "150s")
	b.golden("list-until", 0, "", "list", "--until", "2026-11-21T10:01:30Z", "--where", "tier=1")
	b.golden("list-where-none", 0, "", "list", "--where", "customer=nobody")
	b.golden("get-search", 0, "", "get", "order-3")
	b.golden("list-where-no-value", 2, "", "list", "--where", "customer")
	b.golden("list-where-bad-name", 2, "", "list", "--where", "Customer=acme")
	b.golden("list-where-twice", 2, "", "list", "--where", "tier=1", "--where", "tier=2")
	b.golden("list-since-bad", 2, "", "list", "--since", "yesterday")
	b.golden("list-since-negative", 2, "", "list", "--since", "-1h")
}
