package client_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/store/sqlite"
)

// TestClientHistoryPages: HistoryPage returns one page and its next_since;
// History follows the pages, here cut short by a small page byte bound.
func TestClientHistoryPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, "sqlite::memory:", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	handler, err := httpapi.NewServer(httpapi.Config{Store: st, MaxPageBytes: 400})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	if _, err := c.CreateWorkflow(ctx, api.CreateWorkflowRequest{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	for v := range 9 {
		if _, err := c.PatchWorkflow(ctx, "w", "*", json.RawMessage(fmt.Sprintf(`{"variables":{"n":%d}}`, v))); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.History(ctx, "w")
	if err != nil || len(all) != 10 {
		t.Fatalf("History = %d versions, %v; want 10", len(all), err)
	}
	for i, e := range all {
		if e.Version != int64(i) {
			t.Fatalf("History[%d] is version %d", i, e.Version)
		}
	}
	page, err := c.HistoryPage(ctx, "w", client.HistoryOptions{Since: 8, Limit: 1})
	if err != nil || len(page.Versions) != 1 || page.Versions[0].Version != 8 || page.NextSince == nil || *page.NextSince != 9 {
		t.Fatalf("HistoryPage(since 8, limit 1) = %+v, %v; want version 8 and next_since 9", page, err)
	}
	page, err = c.HistoryPage(ctx, "w", client.HistoryOptions{Since: 9})
	if err != nil || len(page.Versions) != 1 || page.NextSince != nil {
		t.Fatalf("HistoryPage(since 9) = %+v, %v; want the last version and no next_since", page, err)
	}
	_, err = c.HistoryPage(ctx, "w", client.HistoryOptions{Limit: 1001})
	wantStatus(t, err, 400)
}

// TestClientIdempotencyKey: WithIdempotencyKey sends the header; a repeat
// returns the first instance, WithCreated tells which it was, and another
// body with the key is a 422.
func TestClientIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setupClient(t, nil)
	ctx := t.Context()
	var created bool
	first, err := b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Input: json.RawMessage(`{"a":1}`)},
		client.WithIdempotencyKey("k-1"), client.WithCreated(&created))
	if err != nil || !created {
		t.Fatalf("first create: %v, created %v", err, created)
	}
	if got := b.seen.last().Header.Get("Idempotency-Key"); got != "k-1" {
		t.Errorf("Idempotency-Key sent: %q", got)
	}
	again, err := b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Input: json.RawMessage(`{"a":1}`)},
		client.WithIdempotencyKey("k-1"), client.WithCreated(&created))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("repeat: %v, created %v, id %v; want %s, not created", err, created, again, first.ID)
	}
	_, err = b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{Input: json.RawMessage(`{"a":2}`)}, client.WithIdempotencyKey("k-1"))
	wantStatus(t, err, 422)
	_, err = b.c.CreateWorkflow(ctx, api.CreateWorkflowRequest{}, client.WithIdempotencyKey("bad\x7fkey"))
	if err == nil {
		t.Error("a key with DEL was accepted")
	}
}
