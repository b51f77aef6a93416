package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/httpapi"
)

// setupCLIEngine is setupCLI with an engine that runs what needs no handler
// (Serverless Workflow tasks, sleeps): the test plays the remote worker of
// every task step through the tasks API, so what each attempt does, and
// when on the test clock, is known.
func setupCLIEngine(t *testing.T) *cliBundle {
	t.Helper()
	st, clock := openCLIStore(t)
	workers := 1
	eng, err := engine.New(engine.Config{Store: st, Workers: &workers, Now: clock.Now, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	handler, err := httpapi.NewServer(httpapi.Config{Store: st, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &cliBundle{t: t, url: srv.URL, clock: clock, client: client.New(srv.URL), env: map[string]string{"FLOWD_SERVER": srv.URL}}
}
