package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowd/flowd/httpapi"
)

// browserSetup is an API over a fresh SQLite store, called in-process.
func browserSetup(t *testing.T, cfg httpapi.Config) http.Handler {
	t.Helper()
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.Store = st
	h, err := httpapi.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type call struct {
	method, path, host, body string
	header                   map[string]string
}

func (c call) send(h http.Handler) *httptest.ResponseRecorder {
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequest(c.method, c.path, body)
	switch req.Host = c.host; req.Host {
	case "":
		req.Host = "localhost:8080"
	case "-": // no Host at all (HTTP/1.0)
		req.Host = ""
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkStatus fails unless rec has status want, with the JSON error body
// for an error.
func checkStatus(t *testing.T, rec *httptest.ResponseRecorder, want int, what string) {
	t.Helper()
	if rec.Code != want {
		t.Errorf("%s: status %d, want %d; body %s", what, rec.Code, want, rec.Body)
		return
	}
	if want < 400 {
		return
	}
	var e httpapi.ErrorBody
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &e) != nil ||
		e.Error != http.StatusText(want) || e.Message == "" {
		t.Errorf("%s: error %q %s is not the JSON error body", what, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// Only a Host that names this server is answered, on every path: a page of
// another site that rebinds its name to 127.0.0.1 sends its own name.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	h := browserSetup(t, httpapi.Config{
		ListenAddr:   "10.0.0.5:8080",
		AllowedHosts: []string{"flowd.example.com", "API.example.com:8443", "[fd00::1]"},
	})
	for _, tc := range []struct {
		host string
		want int
	}{
		{"evil.example", 421},
		{"evil.example:8080", 421},
		{"-", 421},
		{"localhost", 200},
		{"localhost:41234", 200},
		{"LocalHost:8080", 200},
		{"127.0.0.1:8080", 200},
		{"127.0.0.1", 200},
		{"[::1]:9999", 200},
		{"10.0.0.5:8080", 200}, // the listen address
		{"10.0.0.5:9090", 421}, // ... exactly
		{"10.0.0.5", 421},
		{"flowd.example.com", 200}, // allowed on any port
		{"flowd.example.com:443", 200},
		{"www.flowd.example.com", 421},
		{"api.example.com:8443", 200}, // allowed on its port only
		{"api.example.com", 421},
		{"api.example.com:80", 421},
		{"[fd00::1]:8080", 200},
		{"localhost.evil.example", 421},
	} {
		for _, path := range []string{"/", "/v1/workflows", "/healthz", "/metrics"} {
			checkStatus(t, call{method: "GET", path: path, host: tc.host}.send(h), tc.want, "GET "+path+" Host "+tc.host)
		}
		// Refused before anything else: a write of a foreign Host does nothing.
		rec := call{method: "POST", path: "/v1/workflows", host: tc.host, body: `{"id":"w"}`}.send(h)
		if tc.want == 421 {
			checkStatus(t, rec, 421, "POST Host "+tc.host)
		}
	}
	// None of the refused POSTs created the workflow; the first allowed one did.
	if rec := (call{method: "GET", path: "/v1/workflows/w"}.send(h)); rec.Code != 200 {
		t.Errorf("GET w: %d", rec.Code)
	}
}

// A server listening on every address has no listen host to match; "*"
// answers any Host.
func TestHostCheckUnspecifiedListenAndAnyHost(t *testing.T) {
	t.Parallel()
	h := browserSetup(t, httpapi.Config{ListenAddr: "0.0.0.0:8080"})
	checkStatus(t, call{method: "GET", path: "/healthz", host: "0.0.0.0:8080"}.send(h), 421, "Host 0.0.0.0:8080")
	checkStatus(t, call{method: "GET", path: "/healthz", host: "192.168.1.9:8080"}.send(h), 421, "Host of a LAN address")
	h = browserSetup(t, httpapi.Config{ListenAddr: "[::]:8080", AllowedHosts: []string{httpapi.AnyHost}})
	checkStatus(t, call{method: "GET", path: "/healthz", host: "anything.example"}.send(h), 200, "any host with *")
}

func TestAllowedHostsErrors(t *testing.T) {
	t.Parallel()
	for entry, want := range map[string]string{
		"":                          "empty",
		"https://flowd.example.com": "not a URL",
		"flowd.example.com/v1":      "not a URL",
		"flowd.example.com:http":    `port "http"`,
		"flowd.example.com:0":       `port "0"`,
		"::1:8080:x":                "[::1]:8080",
		":8080":                     "the host is empty",
	} {
		err := httpapi.ValidateAllowedHosts([]string{"ok.example", entry})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"`+entry+`"`) {
			t.Errorf("ValidateAllowedHosts(%q) = %v; want an error naming it and mentioning %q", entry, err, want)
		}
		if _, err := httpapi.NewServer(httpapi.Config{Store: nil, AllowedHosts: []string{entry}}); err == nil {
			t.Errorf("NewServer with allowed host %q: no error", entry)
		}
	}
	if err := httpapi.ValidateAllowedHosts([]string{"*", "flowd.example.com", "flowd.example.com:8080", "10.0.0.5", "[::1]", "::1", "[fd00::1]:443"}); err != nil {
		t.Errorf("valid entries refused: %v", err)
	}
}

// A state-changing request from a page of another origin is refused; the
// same origin, and clients that send no Origin, pass.
func TestOriginCheck(t *testing.T) {
	t.Parallel()
	h := browserSetup(t, httpapi.Config{AllowedHosts: []string{"flowd.example.com"}})
	create := func(id, host, origin string) *httptest.ResponseRecorder {
		c := call{method: "POST", path: "/v1/workflows", host: host, body: `{"id":"` + id + `"}`,
			header: map[string]string{"Content-Type": "application/json"}}
		if origin != "" {
			c.header["Origin"] = origin
		}
		return c.send(h)
	}
	for i, origin := range []string{
		"http://evil.example", "https://evil.example", "http://localhost:8081", "https://localhost:8080:", "null",
		"http://localhost:8080/path", "ftp://localhost:8080", "http://user@localhost:8080", " ", "localhost:8080",
	} {
		checkStatus(t, create("x"+string(rune('a'+i)), "localhost:8080", origin), 403, "Origin "+origin)
	}
	checkStatus(t, create("same-1", "localhost:8080", "http://localhost:8080"), 201, "same origin")
	checkStatus(t, create("same-2", "localhost:8080", "http://LOCALHOST:8080"), 201, "same origin, other case")
	checkStatus(t, create("same-3", "flowd.example.com", "https://flowd.example.com"), 201, "behind a TLS proxy that forwards Host")
	checkStatus(t, create("same-4", "flowd.example.com", "https://flowd.example.com:443"), 201, "default port written out")
	checkStatus(t, create("same-5", "localhost", "http://localhost:80"), 201, "default http port")
	checkStatus(t, create("no-origin", "localhost:8080", ""), 201, "no Origin: not a browser page")
	// No refused request created anything.
	rec := call{method: "GET", path: "/v1/workflows"}.send(h)
	var list httpapi.ListWorkflowsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Workflows) != 6 {
		t.Errorf("after the refused requests: %s; want the 6 allowed workflows", rec.Body)
	}

	// Every state-changing method is checked, on every route.
	checkStatus(t, call{method: "POST", path: "/v1/workflows/same-1/cancel", header: map[string]string{"Origin": "http://evil.example"}}.send(h), 403, "cancel from another site")
	checkStatus(t, call{method: "PATCH", path: "/v1/workflows/same-1", body: `{"x":1}`,
		header: map[string]string{"Origin": "null", "If-Match": "*"}}.send(h), 403, "PATCH with Origin null")
	checkStatus(t, call{method: "DELETE", path: "/v1/workflows/same-1", header: map[string]string{"Origin": "http://evil.example"}}.send(h), 403, "DELETE from another site")
	if rec := (call{method: "GET", path: "/v1/workflows/same-1"}.send(h)); !strings.Contains(rec.Body.String(), `"status":"PENDING"`) {
		t.Errorf("same-1 after the refused cancel: %s", rec.Body)
	}
	// Reads are not refused (the browser keeps their answer from a page of
	// another origin: the API sends no CORS header).
	rec = call{method: "GET", path: "/v1/workflows/same-1", header: map[string]string{"Origin": "http://evil.example"}}.send(h)
	checkStatus(t, rec, 200, "GET from another site")
	if v := rec.Header().Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("Access-Control-Allow-Origin: %q", v)
	}
}

// A body a browser may send to another site without asking first (text/plain,
// a form) is not taken by a JSON route; the route's own media types are.
func TestContentTypeChecked(t *testing.T) {
	t.Parallel()
	h := browserSetup(t, httpapi.Config{})
	post := func(path, ct, body string) *httptest.ResponseRecorder {
		c := call{method: "POST", path: path, body: body, header: map[string]string{}}
		if ct != "" {
			c.header["Content-Type"] = ct
		}
		return c.send(h)
	}
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"application/merge-patch+json", "application/yaml", "application/jsonx", "application/json;;", "nonsense"} {
		checkStatus(t, post("/v1/workflows", ct, `{"id":"ct"}`), 415, "create with "+ct)
		checkStatus(t, post("/v1/batch/status", ct, `{}`), 415, "batch with "+ct)
		checkStatus(t, post("/v1/tasks/poll", ct, `{}`), 415, "poll with "+ct)
	}
	if rec := (call{method: "GET", path: "/v1/workflows/ct"}.send(h)); rec.Code != 404 {
		t.Errorf("a refused create created the workflow: %d", rec.Code)
	}
	rec := post("/v1/workflows", "text/plain", `{"id":"ct"}`)
	if msg := rec.Body.String(); !strings.Contains(msg, `Content-Type \"text/plain\" is not supported on this route: send application/json`) {
		t.Errorf("415 message: %s", msg)
	}
	checkStatus(t, post("/v1/workflows", "application/json; charset=utf-8", `{"id":"ct-1"}`), 201, "JSON with charset")
	checkStatus(t, post("/v1/workflows", "Application/JSON", `{"id":"ct-2"}`), 201, "JSON in capitals")
	checkStatus(t, post("/v1/workflows", "", `{"id":"ct-3"}`), 201, "no Content-Type: read as JSON")

	// An action without a body needs no Content-Type, whatever it says; with
	// a body, the body is JSON.
	checkStatus(t, post("/v1/workflows/ct-1/pause", "text/plain", ""), 409, "empty pause with text/plain") // PENDING cannot pause: it was read
	checkStatus(t, post("/v1/workflows/ct-1/cancel", "text/plain", `{}`), 415, "cancel with a text/plain body")
	checkStatus(t, post("/v1/workflows/ct-1/cancel", "application/x-www-form-urlencoded", `{}`), 415, "cancel with a form body")
	checkStatus(t, post("/v1/workflows/ct-1/cancel", "application/json", `{}`), 200, "cancel with a JSON body")

	// A chunked body (no Content-Length) is a body too; an empty one is not.
	for _, tc := range []struct {
		body string
		want int
	}{{`{}`, 415}, {``, 200}} {
		req := httptest.NewRequest("POST", "/v1/workflows/ct-2/cancel", io.NopCloser(strings.NewReader(tc.body)))
		req.Host, req.ContentLength = "localhost", -1
		req.Header.Set("Content-Type", "text/plain")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkStatus(t, rec, tc.want, "chunked cancel body "+tc.body)
	}

	// Definitions take YAML as well as JSON.
	def := "name: yaml-def\nsteps:\n  - {id: a, type: task, handler: h}\n"
	for i, ct := range []string{"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml; charset=utf-8", ""} {
		d := strings.Replace(def, "handler: h", "handler: h"+string(rune('a'+i)), 1)
		rec := call{method: "PUT", path: "/v1/definitions/yaml-def", body: d, header: map[string]string{"Content-Type": ct}}.send(h)
		checkStatus(t, rec, 201, "definition as "+ct)
	}
	checkStatus(t, call{method: "PUT", path: "/v1/definitions/yaml-def", body: `{"name":"yaml-def","steps":[{"id":"a","type":"task","handler":"j"}]}`,
		header: map[string]string{"Content-Type": "application/json"}}.send(h), 201, "definition as JSON")
	checkStatus(t, call{method: "PUT", path: "/v1/definitions/yaml-def", body: def, header: map[string]string{"Content-Type": "text/plain"}}.send(h), 415, "definition as text/plain")

	// PATCH takes merge-patch+json too, and step completion JSON; both
	// report 415 after If-Match and the body, in their order of errors.
	patch := func(ct string) *httptest.ResponseRecorder {
		return call{method: "PATCH", path: "/v1/workflows/ct-3", body: `{"x":1}`, header: map[string]string{"Content-Type": ct, "If-Match": "*"}}.send(h)
	}
	checkStatus(t, patch("application/merge-patch+json"), 200, "PATCH as merge-patch+json")
	checkStatus(t, patch("application/json"), 200, "PATCH as json")
	checkStatus(t, patch("text/plain"), 415, "PATCH as text/plain")
	checkStatus(t, call{method: "POST", path: "/v1/workflows/ct-3/steps/a/complete", body: `{"output":1}`,
		header: map[string]string{"Content-Type": "text/plain", "If-Match": "*"}}.send(h), 415, "complete step as text/plain")
	checkStatus(t, call{method: "POST", path: "/v1/workflows/ct-3/steps/a/complete", body: `{"output":1}`,
		header: map[string]string{"Content-Type": "text/plain"}}.send(h), 428, "complete step: 428 before 415")
	checkStatus(t, call{method: "POST", path: "/v1/workflows/ct-3/steps/a/complete", body: `{"output":1}`,
		header: map[string]string{"Content-Type": "application/json", "If-Match": "*"}}.send(h), 404, "complete step as JSON: unknown step")
}

// A body announced larger than the limit is refused before it is read:
// it is read (and discarded) only once the answer is sent.
func TestOversizeContentLength(t *testing.T) {
	t.Parallel()
	h := browserSetup(t, httpapi.Config{})
	for _, path := range []string{"/v1/workflows", "/v1/nowhere"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", path, unreadable{t, rec})
		req.Host, req.ContentLength = "localhost", httpapi.MaxBodyBytes+1
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		checkStatus(t, rec, 413, "POST "+path+" with Content-Length over the limit")
		if rec.Header().Get("Connection") != "close" {
			t.Errorf("413 without Connection: close: %v", rec.Header())
		}
	}
	// At the limit exactly, the body is read.
	body := `{"id":"big","input":{"x":"` + strings.Repeat("a", httpapi.MaxBodyBytes-len(`{"id":"big","input":{"x":""}}`)) + `"}}`
	checkStatus(t, call{method: "POST", path: "/v1/workflows", body: body, header: map[string]string{"Content-Type": "application/json"}}.send(h), 201, "a body of exactly the limit")
}

// unreadable is a body the server must not read before it has sent its
// answer to rec.
type unreadable struct {
	t   *testing.T
	rec *httptest.ResponseRecorder
}

func (u unreadable) Read([]byte) (int, error) {
	if !u.rec.Flushed {
		u.t.Error("the body was read before the answer was sent")
	}
	return 0, io.EOF
}
