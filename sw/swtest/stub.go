// Package swtest stubs the external services that Serverless Workflow
// scenarios call (the Swagger petstore, httpbin), so that tests of other
// packages run without a network. It is for tests only: its Client sends
// every request to the stub whatever the URL says.
package swtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Stub is a running stub server and the requests it received.
type Stub struct {
	server *httptest.Server
	target *url.URL

	mu       sync.Mutex
	requests []Received
}

// Received is one request the stub answered. Host is the host the caller
// addressed (petstore.swagger.io, httpbin.org, …), Scheme the scheme it
// asked for before the client redirected the request to the stub.
type Received struct {
	Method string
	Scheme string
	Host   string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// OriginalSchemeHeader carries the scheme a request was addressed with
// before Client sent it to the stub.
const OriginalSchemeHeader = "X-Swtest-Scheme"

// NewStub starts a stub server, closed when the test ends.
func NewStub(t testing.TB) *Stub {
	t.Helper()
	s := &Stub{}
	s.server = httptest.NewServer(s.record(routes()))
	t.Cleanup(s.server.Close)
	target, err := url.Parse(s.server.URL)
	if err != nil {
		t.Fatalf("swtest: stub URL: %v", err)
	}
	s.target = target
	return s
}

// URL is the stub's own base URL (http://127.0.0.1:port).
func (s *Stub) URL() string { return s.server.URL }

// Client returns an HTTP client whose every request, whatever its scheme
// and host, is sent to the stub; the request keeps its path, query and Host
// header, and the original scheme travels in OriginalSchemeHeader.
func (s *Stub) Client() *http.Client {
	return &http.Client{Transport: &redirectTransport{target: s.target, next: s.server.Client().Transport}}
}

// Requests returns a copy of the requests received so far, oldest first.
func (s *Stub) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Received, len(s.requests))
	copy(out, s.requests)
	return out
}

// record notes each request before next answers it.
func (s *Stub) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		scheme := r.Header.Get(OriginalSchemeHeader)
		if scheme == "" {
			scheme = "http"
		}
		s.mu.Lock()
		s.requests = append(s.requests, Received{
			Method: r.Method,
			Scheme: scheme,
			Host:   r.Host,
			Path:   r.URL.Path,
			Query:  r.URL.Query(),
			Header: r.Header.Clone(),
			Body:   body,
		})
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// redirectTransport rewrites each request's URL to the stub.
type redirectTransport struct {
	target *url.URL
	next   http.RoundTripper
}

func (t *redirectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.URL.Scheme = t.target.Scheme
	out.URL.Host = t.target.Host
	if out.Host == "" {
		out.Host = req.URL.Host
	}
	out.Header.Set(OriginalSchemeHeader, req.URL.Scheme)
	return t.next.RoundTrip(out)
}
