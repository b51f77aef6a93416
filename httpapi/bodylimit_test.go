package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/httpapi"
)

// bodyLimitServer is the API on a fresh SQLite database, on a real
// listener: what a body limit does to a connection shows only on one.
func bodyLimitServer(t *testing.T) string {
	t.Helper()
	st := backends[0].open(t)
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.NewServer(httpapi.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// sendWholeBodyThenRead is a client that writes its whole request, body
// and all, before it reads a byte of the answer (Python's urllib does):
// it returns the status line, or the error that ended the exchange. The
// body goes out in pieces (piece bytes every 70 ms), as over a real network: a
// server that closes the connection while the body is still coming
// resets it, and the answer is lost.
func sendWholeBodyThenRead(t *testing.T, addr string, head string, body io.Reader, piece int) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		return "", fmt.Errorf("writing the head: %w", err)
	}
	buf := make([]byte, piece)
	for {
		n, err := io.ReadFull(body, buf)
		if n > 0 {
			time.Sleep(70 * time.Millisecond)
			if _, err := c.Write(buf[:n]); err != nil {
				return "", fmt.Errorf("writing the body: %w", err)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(res.Body)
	return res.Status + " " + string(msg), nil
}

// jsonFiller is n bytes of a JSON string.
func jsonFiller(n int) io.Reader {
	return io.MultiReader(strings.NewReader(`{"id":"big","state":{"variables":{"x":"`),
		io.LimitReader(repeatReader('a'), int64(n-len(`{"id":"big","state":{"variables":{"x":"`)-len(`"}}}`))),
		strings.NewReader(`"}}}`))
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A body over 1 MiB is answered 413, and a client that sends all of it
// before reading gets that answer: flowd reads and discards the rest
// before closing, so the close is not a reset that loses the answer.
// Both ways a body is found too large: announced by Content-Length, and
// found while reading a chunked one.
func TestTooLargeBodyAnswerIsReadable(t *testing.T) {
	t.Parallel()
	addr := bodyLimitServer(t)
	t.Run("beyond the drain", func(t *testing.T) { testHugeBodyEndsCleanly(t, addr) })
	const size = 1_100_000
	for _, tc := range []struct {
		name string
		head string
		body func() io.Reader
	}{
		{"content-length", fmt.Sprintf("POST /v1/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size),
			func() io.Reader { return jsonFiller(size) }},
		{"chunked", "POST /v1/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
			func() io.Reader { return chunked(jsonFiller(size)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sendWholeBodyThenRead(t, addr, tc.head, tc.body(), 100_000)
			if err != nil {
				t.Fatalf("a client that sends its %d-byte body first: %v; want the 413", size, err)
			}
			if !strings.HasPrefix(got, "413 ") || !strings.Contains(got, "request body is larger than 1048576 bytes") {
				t.Fatalf("answer %q, want 413 naming the limit", got)
			}
		})
	}
}

// chunked encodes r as an HTTP/1.1 chunked body.
func chunked(r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		w := httputilChunkedWriter{pw}
		_, err := io.Copy(w, r)
		if err == nil {
			_, err = io.WriteString(pw, "0\r\n\r\n")
		}
		pw.CloseWithError(err)
	}()
	return pr
}

type httputilChunkedWriter struct{ w io.Writer }

func (c httputilChunkedWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(c.w, "%x\r\n", len(p)); err != nil {
		return 0, err
	}
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	_, err := io.WriteString(c.w, "\r\n")
	return len(p), err
}

// A body beyond what flowd drains (8 MiB) still gets the 413 when the
// client reads while it sends, and the connection ends (closed or reset)
// rather than hanging when it does not.
func testHugeBodyEndsCleanly(t *testing.T, addr string) {
	const size = httpapi.MaxDiscardBytes + 2<<20
	head := fmt.Sprintf("POST /v1/workflows HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)

	// Reading while sending: the answer comes before the body is sent.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		_, _ = io.WriteString(c, head)
		_, _ = io.Copy(c, jsonFiller(size))
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading while sending %d bytes: %v", size, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge || !res.Close {
		t.Errorf("answer %s (close: %t), want 413 and the connection closed", res.Status, res.Close)
	}

	// Sending first: the exchange ends, one way or the other, in time.
	start := time.Now()
	got, err := sendWholeBodyThenRead(t, addr, head, jsonFiller(size), 2<<20)
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the exchange took %s (answer %q, %v), want it ended well before the deadline", took, got, err)
	}
	if err == nil && !strings.HasPrefix(got, "413 ") {
		t.Errorf("answer %q, want 413", got)
	}
}
