package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/workflow"
)

// fetchThrough starts fetch on the server at server with url and waits until
// it completes or fails.
func fetchThrough(t *testing.T, server, url string) *workflow.Instance {
	t.Helper()
	return testkit.Fetch(t, client.New(server), url)
}

// internalService stands for a service on this host that no workflow
// should reach; it counts the requests it answers.
func internalService(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "admin secret")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestServeRefusesOutboundCalls: by default an http step reaches neither a
// service on loopback nor the flowd API itself; the instance fails after
// one attempt with an error naming the address and the flag.
func TestServeRefusesOutboundCalls(t *testing.T) {
	t.Parallel()
	secret, hits := internalService(t)
	server, _ := startServe(t, "--db", "sqlite::memory:")
	for _, target := range []string{secret.URL + "/admin/secret", server + "/v1/definitions"} {
		inst := fetchThrough(t, server, target)
		step := inst.State.Steps["call"]
		want := "http step: GET " + target + ": outbound call refused: " + strings.Split(strings.TrimPrefix(target, "http://"), "/")[0] +
			" is a loopback address; flowd serve --outbound-allow opens it"
		if inst.Status != workflow.StatusFailed || step.Error != want || step.Attempts != 1 {
			t.Errorf("%s: %s, step %+v; want FAILED after one attempt with %q", target, inst.Status, step, want)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the internal service answered %d requests", hits.Load())
	}
}

// TestServeOutboundAllow: --outbound-allow HOST:PORT opens that listener
// and no other; FLOWD_OUTBOUND_ALLOW=* opens everything.
func TestServeOutboundAllow(t *testing.T) {
	t.Parallel()
	opened, _ := internalService(t)
	other, otherHits := internalService(t)
	server, _ := startServe(t, "--db", "sqlite::memory:", "--outbound-allow", strings.TrimPrefix(opened.URL, "http://"))
	if inst := fetchThrough(t, server, opened.URL+"/x"); inst.Status != workflow.StatusCompleted {
		t.Errorf("opened listener: %s %+v", inst.Status, inst.State.Steps["call"])
	}
	if inst := fetchThrough(t, server, other.URL+"/x"); inst.Status != workflow.StatusFailed ||
		!strings.Contains(inst.State.Steps["call"].Error, "outbound call refused") || otherHits.Load() != 0 {
		t.Errorf("another listener: %s %+v", inst.Status, inst.State.Steps["call"])
	}
	server, _ = startServeEnv(t, map[string]string{"FLOWD_OUTBOUND_ALLOW": "*"}, "--db", "sqlite::memory:")
	if inst := fetchThrough(t, server, other.URL+"/x"); inst.Status != workflow.StatusCompleted {
		t.Errorf("FLOWD_OUTBOUND_ALLOW=*: %s %+v", inst.Status, inst.State.Steps["call"])
	}
}

func TestServeHelpNamesOutboundAllow(t *testing.T) {
	t.Parallel()
	e, out, _ := testEnv(nil)
	if code := run(context.Background(), []string{"serve", "--help"}, e); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--outbound-allow strings", "loopback, private, link-local (cloud metadata)", "* turns the check off", "--demo opens loopback", "(env FLOWD_OUTBOUND_ALLOW)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out.String())
		}
	}
}
