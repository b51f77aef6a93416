package engine_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// The calls definitions make go through the outbound policy: an engine
// given no OutboundAllow refuses every address that is not globally
// reachable, for good (no retry), with an error naming the address and
// the flag that opens it.

// secretListener is a local listener standing for an internal service; it
// counts the requests it answers.
func secretListener(t *testing.T) (*httptest.Server, *atomic.Int64, string) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "admin secret")
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, &hits, u.Port()
}

const urlFromInput = `
name: fetch
steps:
  - id: call
    type: http
    request: {method: GET, url: "{{ .input.url }}"}
    retry: {max_attempts: 3, initial_backoff: 10ms}
    timeout: 5s
`

// wantRefusedStep waits for the instance to fail on its http step after
// one attempt, with an error holding want and naming the flag.
func wantRefusedStep(t *testing.T, n *node, id, want string) {
	t.Helper()
	inst := n.waitStatus(id, workflow.StatusFailed, 10*time.Second)
	step := inst.State.Steps["call"]
	if !strings.Contains(step.Error, want) || !strings.HasSuffix(step.Error, "; flowd serve --outbound-allow opens it") {
		t.Errorf("%s: step error %q, want it to hold %q and name the flag", id, step.Error, want)
	}
	if step.Attempts != 1 {
		t.Errorf("%s: %d attempts, want 1 (a refusal is not retried)", id, step.Attempts)
	}
}

func TestHTTPStepRefusedByTheOutboundPolicy(t *testing.T) {
	t.Parallel()
	srv, hits, port := secretListener(t)
	b := backends[0]
	n := newNode(t, b, b.newDB(t), nodeOpts{outbound: []string{}})
	n.define(urlFromInput)
	cases := []struct{ id, url, want string }{
		{"loopback", srv.URL + "/admin/secret", "http step: GET " + srv.URL + "/admin/secret: outbound call refused: 127.0.0.1:" + port + " is a loopback address"},
		{"localhost", "http://localhost:" + port + "/admin/secret", "outbound call refused: 127.0.0.1:" + port + " (localhost) is a loopback address"},
		{"mapped", "http://[::ffff:127.0.0.1]:" + port + "/admin/secret", "outbound call refused: 127.0.0.1:" + port + " is a loopback address"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", "outbound call refused: 169.254.169.254:80 is a cloud metadata address"},
	}
	for _, c := range cases {
		n.start("fetch", c.id, `{"url": "`+c.url+`"}`)
	}
	for _, c := range cases {
		wantRefusedStep(t, n, c.id, c.want)
	}
	if hits.Load() != 0 {
		t.Errorf("the internal service answered %d requests", hits.Load())
	}
}

// TestHTTPStepRedirectToARefusedAddress: the first listener is opened by
// its HOST:PORT; the loopback listener it redirects to is not.
func TestHTTPStepRedirectToARefusedAddress(t *testing.T) {
	t.Parallel()
	inner, hits, innerPort := secretListener(t)
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/admin/secret", http.StatusFound)
	}))
	t.Cleanup(outer.Close)
	b := backends[0]
	n := newNode(t, b, b.newDB(t), nodeOpts{outbound: []string{strings.TrimPrefix(outer.URL, "http://")}})
	n.define(urlFromInput)
	n.start("fetch", "redirect", `{"url": "`+outer.URL+`/hook"}`)
	wantRefusedStep(t, n, "redirect", "GET "+outer.URL+"/hook (redirected to "+inner.URL+"/admin/secret): outbound call refused: 127.0.0.1:"+innerPort+" is a loopback address")
	if hits.Load() != 0 {
		t.Errorf("the internal service answered %d requests", hits.Load())
	}
}

// TestHTTPStepOpenedByOutboundAllow: an entry naming the listener opens it
// (the same step as above then completes); "*" opens everything.
func TestHTTPStepOpenedByOutboundAllow(t *testing.T) {
	t.Parallel()
	srv, _, port := secretListener(t)
	b := backends[0]
	for _, allow := range [][]string{{"127.0.0.1:" + port}, {"*"}} {
		n := newNode(t, b, b.newDB(t), nodeOpts{outbound: allow})
		n.define(urlFromInput)
		inst := n.waitStatus(n.start("fetch", "opened", `{"url": "`+srv.URL+`/admin/secret"}`).ID, workflow.StatusCompleted, 10*time.Second)
		if got := output(t, inst, "call"); got != `{"status":200,"body":"admin secret"}` {
			t.Errorf("%q: output %s", allow, got)
		}
	}
}

const swCallFromInput = `
document: {dsl: '1.0.0', namespace: test, name: sw-fetch, version: '1.0.0'}
do:
  - fetch:
      call: http
      with:
        method: get
        endpoint: ${ .url }
`

const swOpenAPIFromInput = `
document: {dsl: '1.0.0', namespace: test, name: sw-openapi, version: '1.0.0'}
do:
  - fetch:
      call: openapi
      with:
        document:
          endpoint: ${ .doc }
        operationId: secret
`

// TestServerlessCallsRefusedByTheOutboundPolicy: a refused call: http or
// call: openapi raises a configuration error (status 403) naming the
// address and the flag; uncaught, it fails the instance.
func TestServerlessCallsRefusedByTheOutboundPolicy(t *testing.T) {
	t.Parallel()
	srv, hits, port := secretListener(t)
	// An OpenAPI document, on an opened listener, whose server is the
	// internal service.
	doc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "servers": [{"url": "`+srv.URL+`"}],
			"paths": {"/admin/secret": {"get": {"operationId": "secret"}}}}`)
	}))
	t.Cleanup(doc.Close)
	b := backends[0]
	n := newNode(t, b, b.newDB(t), nodeOpts{outbound: []string{strings.TrimPrefix(doc.URL, "http://")}})
	n.define(swCallFromInput)
	n.define(swOpenAPIFromInput)
	n.start("sw-fetch", "call-http", `{"url": "http://localhost:`+port+`/admin/secret"}`)
	n.start("sw-openapi", "openapi-document", `{"doc": "`+srv.URL+`/openapi.json"}`)
	n.start("sw-openapi", "openapi-server", `{"doc": "`+doc.URL+`/openapi.json"}`)
	for id, detail := range map[string]string{
		"call-http":        "GET http://localhost:" + port + "/admin/secret: outbound call refused: 127.0.0.1:" + port + " (localhost) is a loopback address; flowd serve --outbound-allow opens it",
		"openapi-document": "GET " + srv.URL + "/openapi.json: outbound call refused: 127.0.0.1:" + port + " is a loopback address; flowd serve --outbound-allow opens it",
		"openapi-server":   "GET " + srv.URL + "/admin/secret: outbound call refused: 127.0.0.1:" + port + " is a loopback address; flowd serve --outbound-allow opens it",
	} {
		inst := n.waitStatus(id, workflow.StatusFailed, 10*time.Second)
		inst.ShowError()
		var e struct {
			Type     string `json:"type"`
			Status   int    `json:"status"`
			Detail   string `json:"detail"`
			Instance string `json:"instance"`
		}
		if err := json.Unmarshal(inst.Error, &e); err != nil {
			t.Fatalf("%s: error %s: %v", id, inst.Error, err)
		}
		if e.Type != "https://serverlessworkflow.io/spec/1.0.0/errors/configuration" || e.Status != http.StatusForbidden || e.Detail != detail || e.Instance != "/do/0/fetch" {
			t.Errorf("%s: error %s, want a configuration error (403) at /do/0/fetch with detail %q", id, inst.Error, detail)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the internal service answered %d requests", hits.Load())
	}
}

func TestOutboundAllowErrors(t *testing.T) {
	t.Parallel()
	b := backends[0]
	st := b.open(t, b.newDB(t))
	t.Cleanup(func() { st.Close() })
	_, err := engine.New(engine.Config{Store: st, OutboundAllow: []string{"10.0.0.0/33"}})
	if want := `engine: OutboundAllow: "10.0.0.0/33" is not a CIDR such as 10.0.0.0/8 or fd00::/8`; err == nil || err.Error() != want {
		t.Errorf("bad entry: %v, want %s", err, want)
	}
	_, err = engine.New(engine.Config{Store: st, OutboundAllow: []string{"*"}, HTTPClient: http.DefaultClient})
	if err == nil || !strings.Contains(err.Error(), "set HTTPClient or OutboundAllow, not both") {
		t.Errorf("both: %v", err)
	}
}

// TestOutboundWarnsOfIgnoredProxies: a proxy variable the calls ignore is
// said at start, not ignored silently. (Not parallel: it sets the
// environment.)
func TestOutboundWarnsOfIgnoredProxies(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://proxy.internal:3128")
	b := backends[0]
	st := b.open(t, b.newDB(t))
	t.Cleanup(func() { st.Close() })
	for _, c := range []struct {
		allow []string
		warn  bool
	}{{nil, true}, {[]string{"10.0.0.0/8"}, true}, {[]string{"*"}, false}} {
		var log strings.Builder
		if _, err := engine.New(engine.Config{Store: st, OutboundAllow: c.allow, Logger: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(log.String(), "level=WARN") && strings.Contains(log.String(), "variables=[HTTPS_PROXY]")
		if warned != c.warn {
			t.Errorf("OutboundAllow %q: warned %v, want %v; log:\n%s", c.allow, warned, c.warn, log.String())
		}
	}
}

const swRetryCommunication = `
document: {dsl: '1.0.0', namespace: test, name: sw-retry, version: '1.0.0'}
do:
  - attempt:
      try:
        - fetch:
            call: http
            with:
              method: get
              endpoint: ${ .url }
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/spec/1.0.0/errors/communication
        retry:
          delay: {milliseconds: 1}
          limit:
            attempt: {count: 5}
`

// TestServerlessRefusalIsNotRetried: a try that retries communication
// errors lets a refusal through: the call runs once and the instance
// fails with the configuration error.
func TestServerlessRefusalIsNotRetried(t *testing.T) {
	t.Parallel()
	srv, hits, port := secretListener(t)
	b := backends[0]
	n := newNode(t, b, b.newDB(t), nodeOpts{outbound: []string{}})
	n.define(swRetryCommunication)
	n.start("sw-retry", "retry", `{"url": "`+srv.URL+`/admin/secret"}`)
	inst := n.waitStatus("retry", workflow.StatusFailed, 10*time.Second)
	inst.ShowError()
	want := `{"type": "https://serverlessworkflow.io/spec/1.0.0/errors/configuration", "status": 403, "title": "Configuration Error",
		"detail": "GET ` + srv.URL + `/admin/secret: outbound call refused: 127.0.0.1:` + port + ` is a loopback address; flowd serve --outbound-allow opens it",
		"instance": "/do/0/attempt/try/0/fetch"}`
	if !jsonEqual(string(inst.Error), want) {
		t.Errorf("error %s, want %s", inst.Error, want)
	}
	// One call, one fault: no retry of the try.
	refused := "Configuration Error: GET " + srv.URL + "/admin/secret: outbound call refused: 127.0.0.1:" + port + " is a loopback address; flowd serve --outbound-allow opens it"
	if got := n.causes(inst); len(got) != 1 || got[0] != "task /do/0/attempt/try/0/fetch faulted: "+refused {
		t.Errorf("causes %q, want the call's one fault", got)
	}
	if hits.Load() != 0 {
		t.Errorf("the internal service answered %d requests", hits.Load())
	}
}
