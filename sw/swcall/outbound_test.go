package swcall_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/outbound"
	"github.com/flowd/flowd/sw/swcall"
)

// policyClient is a client of the outbound policy entries open.
func policyClient(t *testing.T, entries ...string) *http.Client {
	t.Helper()
	p, err := outbound.Parse(entries)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Client(5 * time.Second)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// wantRefused checks that res is the configuration error of a refused
// call naming detail and the flag, and that the listener saw nothing.
func wantRefused(t *testing.T, res swcall.Result, detail string, got <-chan seen) {
	t.Helper()
	wantError(t, res, swcall.TypeConfiguration, http.StatusForbidden, detail)
	if !strings.HasSuffix(res.Error.Detail, "; flowd serve --outbound-allow opens it") {
		t.Errorf("detail %q does not name the flag", res.Error.Detail)
	}
	if res.Error.Instance != "/do/0/call" {
		t.Errorf("instance %q, want the task's pointer", res.Error.Instance)
	}
	select {
	case s := <-got:
		t.Errorf("the refused listener received %s %s", s.method, s.requestURI)
	default:
	}
}

func TestCallHTTPRefusedByThePolicy(t *testing.T) {
	t.Parallel()
	srv, got := serve(t, http.StatusOK, "text/plain", "admin secret")
	for _, uri := range []string{
		srv.URL + "/admin/secret",
		"http://localhost:" + strings.Split(hostPort(t, srv.URL), ":")[1] + "/admin/secret",
		"http://[::ffff:127.0.0.1]:" + strings.Split(hostPort(t, srv.URL), ":")[1] + "/admin/secret",
	} {
		res := call(t, policyClient(t), swcall.Request{Kind: swcall.KindHTTP, Method: "get", URI: uri, Pointer: "/do/0/call"})
		wantRefused(t, res, "GET "+uri+": outbound call refused: "+hostPort(t, srv.URL)+" ", got)
	}
	// Without a client, Do uses the default policy's.
	res := call(t, nil, swcall.Request{Kind: swcall.KindHTTP, Method: "get", URI: srv.URL, Pointer: "/do/0/call"})
	wantRefused(t, res, "is a loopback address", got)
	// Opened, the same call goes through.
	res = call(t, policyClient(t, hostPort(t, srv.URL)), swcall.Request{Kind: swcall.KindHTTP, Method: "get", URI: srv.URL + "/admin/secret"})
	if v := mustOutput(t, res); v != "admin secret" {
		t.Errorf("opened call: %v", v)
	}
}

func TestCallHTTPRedirectToARefusedAddress(t *testing.T) {
	t.Parallel()
	inner, got := serve(t, http.StatusOK, "text/plain", "admin secret")
	outer := httptest302(t, inner.URL+"/admin/secret")
	res := call(t, policyClient(t, hostPort(t, outer)), swcall.Request{Kind: swcall.KindHTTP, Method: "get", URI: outer + "/hook", Pointer: "/do/0/call"})
	wantRefused(t, res, "GET "+outer+"/hook (redirected to "+inner.URL+"/admin/secret): outbound call refused: "+hostPort(t, inner.URL)+" is a loopback address", got)
}

// httptest302 is a listener that redirects every request to target.
func httptest302(t *testing.T, target string) string {
	t.Helper()
	return serveFunc(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) })
}

// serveFunc starts a listener answering with h and returns its URL.
func serveFunc(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCallOpenAPIDocumentRefusedByThePolicy(t *testing.T) {
	t.Parallel()
	srv, got := apiServer(t, "application/json", openAPI3)
	res := call(t, policyClient(t), swcall.Request{Kind: swcall.KindOpenAPI, Document: srv.URL + "/doc", Operation: "other",
		Parameters: map[string]json.RawMessage{}, Pointer: "/do/0/call"})
	wantRefused(t, res, "GET "+srv.URL+"/doc: outbound call refused: "+hostPort(t, srv.URL)+" is a loopback address", got)
}

// TestCallOpenAPIServerRefusedByThePolicy: the document is opened, the
// server it names is not.
func TestCallOpenAPIServerRefusedByThePolicy(t *testing.T) {
	t.Parallel()
	api, got := apiServer(t, "application/json", openAPI3)
	doc := serveFunc(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.ReplaceAll(openAPI3, "{{host}}", hostPort(t, api.URL)))
	})
	res := call(t, policyClient(t, hostPort(t, doc)), swcall.Request{Kind: swcall.KindOpenAPI, Document: doc + "/doc", Operation: "other",
		Parameters: map[string]json.RawMessage{}, Pointer: "/do/0/call"})
	wantRefused(t, res, "GET "+api.URL+"/elsewhere/other: outbound call refused: "+hostPort(t, api.URL)+" is a loopback address", got)
}
