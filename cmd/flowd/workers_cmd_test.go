package main

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
)

// setupWorkersCLI is setupCLI with an engine on the same clock and a fixed
// node id, so that the workers' nodes and poll times in the output are known.
func setupWorkersCLI(t *testing.T) (*cliBundle, *engine.Engine) {
	t.Helper()
	b := setupCLI(t)
	st, clock := openCLIStore(t)
	none := 0
	eng, err := engine.New(engine.Config{Store: st, Workers: &none, NodeID: "node-1", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	b.url, b.clock, b.client = srv.URL, clock, client.New(srv.URL)
	b.env["FLOWD_SERVER"] = srv.URL
	return b, eng
}

func TestWorkersCommand(t *testing.T) {
	b, _ := setupWorkersCLI(t)
	b.golden("workers-empty", 0, "", "workers")
	for _, p := range []api.PollRequest{
		{Worker: "resizer-1", Handlers: []string{"resize", "crop"}},
		{Worker: "mailer", Handlers: []string{"send-mail"}},
	} {
		if _, err := b.client.PollTask(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	b.golden("workers", 0, "", "workers")
	b.golden("workers-json", 0, "", "workers", "-o", "json")
	b.golden("workers-bad-args", 2, "", "workers", "extra")
}

// A worker is live while its last poll is at most 60 s old, stale after.
func TestWorkersLiveness(t *testing.T) {
	b, _ := setupWorkersCLI(t)
	if _, err := b.client.PollTask(t.Context(), api.PollRequest{Worker: "w1", Handlers: []string{"h"}}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if res := b.run("", nil, "workers"); res.code != 0 || !strings.Contains(res.stdout, "2026-11-21T10:00:00Z  0          live\n") || res.stderr != "" {
		t.Errorf("a poll 60s old: %+v", res)
	}
	b.clock.Advance(time.Second)
	res := b.run("", nil, "workers")
	if res.code != 0 || !strings.Contains(res.stdout, "2026-11-21T10:00:00Z  0          stale (1m1s ago)\n") ||
		res.stderr != "1 worker last polled more than 60s ago: stopped, or cut off from the server; the tasks of its handlers wait for another worker\n" {
		t.Errorf("a poll 61s old: %+v", res)
	}
}

func TestListByIDPrefix(t *testing.T) {
	b := setupCLI(t)
	for _, id := range []string{"order_1", "orderx2", "order_3", "invoice-1"} {
		if _, err := b.client.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	b.golden("list-id-prefix", 0, "", "list", "--id-prefix", "order_")
	b.golden("list-id-prefix-page", 0, "", "list", "--id-prefix", "order", "--limit", "2")
	b.golden("list-id-prefix-none", 0, "", "list", "--id-prefix", "nothing")
	b.golden("list-id-prefix-bad", 2, "", "list", "--id-prefix", "order%")
	b.golden("list-id-prefix-empty", 2, "", "list", "--id-prefix", "")
}

func TestListByParent(t *testing.T) {
	b := setupCLI(t)
	if _, err := b.client.CreateWorkflow(t.Context(), api.CreateWorkflowRequest{ID: "loner"}); err != nil {
		t.Fatal(err)
	}
	b.golden("list-parent-none", 0, "", "list", "--parent", "loner")
	b.golden("list-parent-bad", 2, "", "list", "--parent", "a b")
	b.golden("list-parent-empty", 2, "", "list", "--parent", "")
}
