package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// rawServer serves h with net/http over JSONErrorListener on a loopback
// port, with small header limits, and returns its address.
func rawServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, MaxHeaderBytes: 4 << 10, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(httpapi.JSONErrorListener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// rawRequest writes req as is on a new connection and reads one response.
func rawRequest(t *testing.T, addr, req string) rawResponse {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("writing %.60q: %v", req, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.60q: %v", req, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the body of the answer to %.60q: %v", req, err)
	}
	return rawResponse{status: res.StatusCode, header: res.Header, body: body}
}

// checkRawError fails unless r is status with the JSON error body, a
// correct Content-Length and a message containing msg.
func checkRawError(t *testing.T, r rawResponse, status int, msg, what string) {
	t.Helper()
	var e httpapi.ErrorBody
	if r.status != status || r.header.Get("Content-Type") != "application/json" || json.Unmarshal(r.body, &e) != nil ||
		e.Error != http.StatusText(status) || !strings.Contains(e.Message, msg) {
		t.Errorf("%s: %d %v %s; want %d with the JSON error body mentioning %q", what, r.status, r.header, r.body, status, msg)
		return
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("%s: Content-Length %q for a body of %d bytes", what, cl, len(r.body))
	}
}

// The errors net/http answers before any handler runs are JSON too.
func TestJSONErrorListenerRewritesGoErrors(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tc := range []struct {
		what, req string
		status    int
		msg       string
	}{
		{"bad percent-encoding", "GET /v1/workflows/%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "malformed request line"},
		{"bad percent-encoding, HTTP/1.0", "GET /%zz HTTP/1.0\r\n\r\n", 400, "malformed request line"},
		{"garbage request line", "HELLO\r\n\r\n", 400, "malformed request line"},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400, "missing required Host header"},
		{"malformed Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "malformed Host header"},
		{"invalid header name", "GET / HTTP/1.1\r\nHost: localhost\r\nBad Name: x\r\n\r\n", 400, "invalid header name"},
		{"invalid header value", "GET / HTTP/1.1\r\nHost: localhost\r\nX-A: a\x01b\r\n\r\n", 400, "not valid HTTP"},
		{"header line without colon", "GET / HTTP/1.1\r\nHost: localhost\r\nnocolon\r\n\r\n", 400, "not valid HTTP"},
		{"bad Content-Length", "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n", 400, "not valid HTTP"},
		{"headers too large", "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", 431, "header fields are too large"},
		{"unknown transfer encoding", "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "Transfer-Encoding"},
		{"unknown HTTP version", "GET / HTTP/3.0\r\nHost: localhost\r\n\r\n", 505, "HTTP version"},
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: localhost\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n{}", 417, "Expect"},
	} {
		checkRawError(t, rawRequest(t, addr, tc.req), tc.status, tc.msg, tc.what)
	}
	// A well-formed request is untouched.
	if r := rawRequest(t, addr, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); r.status != 204 {
		t.Errorf("a good request: %d %s", r.status, r.body)
	}
}

// Responses of handlers pass through byte for byte, even a handler's own
// plain-text error and a body that quotes net/http's error format.
func TestJSONErrorListenerLeavesHandlersAlone(t *testing.T) {
	t.Parallel()
	goError := "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"
	addr := rawServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quote" {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, goError)
			return
		}
		http.Error(w, "400 Bad Request", http.StatusBadRequest)
	}))
	r := rawRequest(t, addr, "GET /plain HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if r.status != 400 || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || string(r.body) != "400 Bad Request\n" {
		t.Errorf("a handler's plain-text error: %d %v %q", r.status, r.header, r.body)
	}
	r = rawRequest(t, addr, "GET /quote HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if r.status != 200 || string(r.body) != goError {
		t.Errorf("a body quoting net/http's error: %d %q", r.status, r.body)
	}
}

// Through the whole API: a Host that is not this server is 421 even when
// the request is well-formed; net/http's own errors are JSON.
func TestRawRequestsToTheAPI(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, browserSetup(t, httpapi.Config{}))
	checkRawError(t, rawRequest(t, addr, "GET /v1/workflows/%zz HTTP/1.1\r\nHost: localhost\r\n\r\n"), 400, "malformed request line", "bad percent-encoding")
	checkRawError(t, rawRequest(t, addr, "GET /v1/workflows HTTP/1.1\r\nHost: evil.example\r\n\r\n"), 421, "evil.example", "foreign Host")
	// A body announced too large is refused at once: the test sends none.
	checkRawError(t, rawRequest(t, addr, "POST /v1/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1048577\r\n\r\n"),
		413, "larger than 1048576 bytes", "Content-Length over the limit")
	checkRawError(t, rawRequest(t, addr, "POST /v1/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nOrigin: http://evil.example\r\nContent-Length: 2\r\n\r\n{}"),
		403, "evil.example", "cross-site text/plain POST")
	r := rawRequest(t, addr, "POST /v1/workflows HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	if r.status != 201 {
		t.Errorf("create: %d %s", r.status, r.body)
	}
}
