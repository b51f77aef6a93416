package pgtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Gate stands in front of a database server on a port of its own, for a
// test that needs the server down and then up again without stopping the
// cluster other tests share. Shut, it resets every connection at once, as
// a server that is not running (or not accepting yet) looks to a client;
// open, it relays connections to the server.
type Gate struct {
	ln     net.Listener
	target string
	open   atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

// NewGate starts a shut gate in front of the server of dbURL (a URL from
// NewDatabase) and returns it with dbURL rewritten to go through it. The
// gate closes, with every connection it relays, when tb ends.
func NewGate(tb testing.TB, dbURL string) (*Gate, string) {
	tb.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("pgtest: gate: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest: gate: %v", err)
	}
	g := &Gate{ln: ln, target: u.Host}
	go g.serve()
	tb.Cleanup(g.close)
	u.Host = ln.Addr().String()
	return g, u.String()
}

// Open lets connections through from now on.
func (g *Gate) Open() { g.open.Store(true) }

func (g *Gate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		if !g.open.Load() {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not an orderly close
			}
			c.Close()
			continue
		}
		go g.relay(c)
	}
}

func (g *Gate) relay(c net.Conn) {
	s, err := net.Dial("tcp", g.target)
	if err != nil {
		c.Close()
		return
	}
	g.mu.Lock()
	g.conns = append(g.conns, c, s)
	g.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
}

func (g *Gate) close() {
	g.ln.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
}
