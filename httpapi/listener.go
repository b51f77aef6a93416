package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// JSONErrorListener wraps ln so that the errors net/http answers by itself,
// before any handler runs, have the API's JSON error body too: a request line
// it cannot parse (bad percent-encoding in the path), a malformed or missing
// Host, an invalid header, headers over http.Server.MaxHeaderBytes (431), an
// unknown Transfer-Encoding (501), an unknown HTTP version (505), an Expect
// other than 100-continue (417).
//
// net/http writes those straight to the connection, in one write of a fixed
// shape ("HTTP/1.1 400 Bad Request: …", Content-Type text/plain, Connection:
// close, the status line again as the body). A connection of ln recognises
// exactly that write and sends the same status as JSON instead; every other
// write passes through untouched. The shape is asserted by this package's
// tests, so a Go release that changes it fails them rather than clients.
func JSONErrorListener(ln net.Listener) net.Listener { return jsonErrorListener{ln} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if rewritten, ok := rewriteGoHTTPError(p); ok {
		if _, err := c.Conn.Write(rewritten); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite keeps the half-close net/http does after a 431, so the client
// reads the answer before the connection ends.
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// goErrorHeaders are the headers of every error net/http writes itself.
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// maxGoErrorBytes bounds the writes examined: net/http's own errors are
// short, and responses of handlers larger than this are never inspected.
const maxGoErrorBytes = 1024

// rewriteGoHTTPError returns the JSON form of p when p is one whole error
// response written by net/http itself.
func rewriteGoHTTPError(p []byte) ([]byte, bool) {
	if len(p) > maxGoErrorBytes || !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return nil, false
	}
	if isGoExpectationFailed(p) {
		return jsonErrorResponse(http.StatusExpectationFailed, "the request's Expect header is not supported (only 100-continue is)"), true
	}
	statusLine, body, ok := strings.Cut(string(p[len("HTTP/1.1 "):]), goErrorHeaders)
	if !ok || len(statusLine) < 5 || statusLine[3] != ' ' {
		return nil, false
	}
	code, err := strconv.Atoi(statusLine[:3])
	reason := http.StatusText(code)
	if err != nil || code < 400 || reason == "" || !strings.HasPrefix(statusLine[4:], reason) {
		return nil, false
	}
	detail, hasDetail := strings.CutPrefix(statusLine[4+len(reason):], ": ")
	if !hasDetail && len(statusLine) != 4+len(reason) {
		return nil, false
	}
	// The body repeats the status line, except for the 501's.
	if body != statusLine && !(code == http.StatusNotImplemented && body == "Unsupported transfer encoding") {
		return nil, false
	}
	return jsonErrorResponse(code, goHTTPErrorMessage(code, detail)), true
}

// isGoExpectationFailed reports whether p is net/http's answer to an Expect
// header other than 100-continue: a 417 with no body and no header of a
// handler (flowd's handlers never answer 417, and always set X-Request-Id).
func isGoExpectationFailed(p []byte) bool {
	const head = "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: "
	const tail = "\r\nContent-Length: 0\r\n\r\n"
	if !bytes.HasPrefix(p, []byte(head)) || !bytes.HasSuffix(p, []byte(tail)) || len(p) < len(head)+len(tail) {
		return false
	}
	date := p[len(head) : len(p)-len(tail)]
	return !bytes.Contains(date, []byte("\r\n"))
}

// jsonErrorResponse is a whole HTTP/1.1 response with the JSON error body;
// the connection closes after it, as after net/http's own.
func jsonErrorResponse(code int, msg string) []byte {
	b, _ := json.Marshal(ErrorBody{Error: http.StatusText(code), Message: msg}) // strings only: cannot fail
	b = append(b, '\n')
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", code, http.StatusText(code), len(b))
	return append([]byte(head), b...)
}

func goHTTPErrorMessage(code int, detail string) string {
	switch {
	case code == http.StatusRequestHeaderFieldsTooLarge:
		return "the request's header fields are too large"
	case code == http.StatusNotImplemented:
		return "the request's Transfer-Encoding is not supported (only chunked is)"
	case code == http.StatusHTTPVersionNotSupported:
		return "the request's HTTP version is not supported (HTTP/1.0 and HTTP/1.1 are)"
	case detail != "":
		return "the request is not valid HTTP: " + detail
	}
	return "the request is not valid HTTP: a malformed request line (such as bad percent-encoding in the path), header or body framing"
}
