package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
	"github.com/flowd/flowd/internal/testkit"
	"github.com/flowd/flowd/server"
)

// rawRequest writes req as is to addr and returns the answer's status,
// Content-Type and decoded error body.
func rawRequest(t *testing.T, addr, req string) (int, string, httpapi.ErrorBody) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.60q: %v", req, err)
	}
	defer res.Body.Close()
	var e httpapi.ErrorBody
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &e)
	return res.StatusCode, res.Header.Get("Content-Type"), e
}

// The real server: net/http's own errors are JSON, a foreign Host is 421,
// AllowedHosts and the listen address admit theirs.
func TestBrowserSafeDefaults(t *testing.T) {
	s := start(t, server.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), AllowedHosts: []string{"flowd.example.com"}}, nil)
	addr := strings.TrimPrefix(s.URL(), "http://")
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		req    string
		status int
		msg    string
	}{
		{"GET /v1/workflows/%zz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", 400, "malformed request line"},
		{"GET / HTTP/1.1\r\nHost: " + addr + "\r\nBad Name: x\r\n\r\n", 400, "invalid header name"},
		{"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", 421, `Host "evil.example"`},
		{"GET /v1/workflows HTTP/1.1\r\nHost: evil.example:" + port + "\r\n\r\n", 421, `Host "evil.example:` + port + `"`},
		{"GET /nowhere HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", 404, "no route GET /nowhere"},
		{"POST /v1/workflows HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 2000000\r\n\r\n", 413, "larger than"},
		{"POST /v1/workflows HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}", 415, "text/plain"},
		{"POST /v1/workflows HTTP/1.1\r\nHost: " + addr + "\r\nOrigin: https://evil.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 403, "evil.example"},
	} {
		status, ct, e := rawRequest(t, addr, tc.req)
		if status != tc.status || ct != "application/json" || e.Error != http.StatusText(tc.status) || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%.70q: %d %q %+v; want %d with a JSON error mentioning %q", tc.req, status, ct, e, tc.status, tc.msg)
		}
	}
	for _, host := range []string{addr, "localhost:" + port, "flowd.example.com", "flowd.example.com:" + port} {
		if status, _, e := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); status != 200 {
			t.Errorf("Host %s: %d %+v", host, status, e)
		}
	}
	// The server's own client is same-site by construction.
	if _, err := s.Client().CreateWorkflow(context.Background(), httpapi.CreateWorkflowRequest{ID: "ok"}); err != nil {
		t.Fatal(err)
	}
}

func TestAllowedHostsValidated(t *testing.T) {
	_, err := server.New(context.Background(), server.Config{DB: "sqlite::memory:", AllowedHosts: []string{"https://flowd.example.com"}})
	if err == nil || !strings.Contains(err.Error(), `server: AllowedHosts: allowed host "https://flowd.example.com"`) {
		t.Errorf("New with a URL as allowed host: %v", err)
	}
}

// A server on every address without AllowedHosts says at start that only
// loopback names are answered.
func TestWarnsWithoutAllowedHostsOnEveryAddress(t *testing.T) {
	var logs testkit.SyncBuffer
	s := start(t, server.Config{
		DB: "sqlite:" + filepath.Join(t.TempDir(), "flowd.db"), Addr: "0.0.0.0:0", Insecure: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}, nil)
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "--allowed-hosts") {
		t.Errorf("start log: %s", l)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL(), "http://"))
	if status, _, e := rawRequest(t, "127.0.0.1:"+port, "GET /healthz HTTP/1.1\r\nHost: 0.0.0.0:"+port+"\r\n\r\n"); status != 421 {
		t.Errorf("Host 0.0.0.0: %d %+v; want 421", status, e)
	}
}
