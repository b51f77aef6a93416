package outbound

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listener is a local HTTP server that counts the requests it answers.
type listener struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

func listen(t *testing.T, h http.HandlerFunc) *listener {
	t.Helper()
	l := &listener{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") }
	}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(l.Close)
	u, _ := url.Parse(l.URL)
	l.port = u.Port()
	return l
}

// get fetches rawURL with a client of p and returns the body or the error.
func get(t *testing.T, p *Policy, rawURL string) (string, error) {
	t.Helper()
	c := p.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	res, err := c.Get(rawURL)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// wantRefused checks that err, of a GET of sent, is a refusal naming want
// (and the redirect's target when there was one), and that target
// answered nothing.
func wantRefused(t *testing.T, err error, sent, want string, target *listener) {
	t.Helper()
	refused := Refused(err, "GET", sent)
	var re *RefusedError
	if !errors.As(refused, &re) {
		t.Fatalf("got %v, want a refusal", err)
	}
	if !strings.Contains(refused.Error(), want) || !strings.HasSuffix(refused.Error(), "; flowd serve --outbound-allow opens it") {
		t.Errorf("got %q, want it to name %q and the flag", refused.Error(), want)
	}
	if target != nil && target.hits.Load() != 0 {
		t.Errorf("the refused listener answered %d requests", target.hits.Load())
	}
}

func TestClientRefusesLoopback(t *testing.T) {
	t.Parallel()
	srv := listen(t, nil)
	_, err := get(t, Default(), srv.URL+"/admin/secret")
	wantRefused(t, err, srv.URL+"/admin/secret", "GET "+srv.URL+"/admin/secret: outbound call refused: 127.0.0.1:"+srv.port+" is a loopback address", srv)
}

// TestClientRefusesANameThatResolvesToLoopback: the check is on the
// address dialled, after DNS.
func TestClientRefusesANameThatResolvesToLoopback(t *testing.T) {
	t.Parallel()
	srv := listen(t, nil)
	u := "http://localhost:" + srv.port + "/"
	_, err := get(t, Default(), u)
	wantRefused(t, err, u, "(localhost) is a loopback address", srv)
}

func TestClientRefusesIPv4MappedLoopback(t *testing.T) {
	t.Parallel()
	srv := listen(t, nil)
	u := "http://[::ffff:127.0.0.1]:" + srv.port + "/"
	_, err := get(t, Default(), u)
	wantRefused(t, err, u, "127.0.0.1:"+srv.port+" is a loopback address", srv)
}

// TestRefusalHidesPasswords: the error is stored in the workflow, so a
// password of the URL is not repeated there.
func TestRefusalHidesPasswords(t *testing.T) {
	t.Parallel()
	srv := listen(t, nil)
	u := "http://user:s3cret@127.0.0.1:" + srv.port + "/x"
	_, err := get(t, Default(), u)
	wantRefused(t, err, u, "GET http://user:***@127.0.0.1:"+srv.port+"/x: outbound call refused", srv)
	if strings.Contains(Refused(err, "GET", u).Error(), "s3cret") {
		t.Errorf("the refusal shows the password: %v", Refused(err, "GET", u))
	}
}

// TestClientChecksEveryRedirectHop: the first listener is opened, the one
// it redirects to is not.
func TestClientChecksEveryRedirectHop(t *testing.T) {
	t.Parallel()
	inner := listen(t, nil)
	outer := listen(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/admin/secret", http.StatusFound)
	})
	p := mustParse(t, "127.0.0.1:"+outer.port)
	_, err := get(t, p, outer.URL+"/hook")
	wantRefused(t, err, outer.URL+"/hook", "GET "+outer.URL+"/hook (redirected to "+inner.URL+"/admin/secret): outbound call refused: 127.0.0.1:"+inner.port+" is a loopback address", inner)
	if outer.hits.Load() != 1 {
		t.Errorf("the opened listener answered %d requests, want 1", outer.hits.Load())
	}
}

// TestClientRefusesMetadataWithoutConnecting: the refusal comes before
// the connect, so it is immediate where a connection attempt to an
// unroutable address would wait for the timeout.
func TestClientRefusesMetadataWithoutConnecting(t *testing.T) {
	t.Parallel()
	c := Default().Client(2 * time.Second)
	begin := time.Now()
	_, err := c.Get("http://169.254.169.254/latest/meta-data/")
	wantRefused(t, err, "http://169.254.169.254/latest/meta-data/", "169.254.169.254:80 is a cloud metadata address", nil)
	if d := time.Since(begin); d > time.Second {
		t.Errorf("the refusal took %s", d)
	}
}

func TestClientUnrestricted(t *testing.T) {
	t.Parallel()
	srv := listen(t, nil)
	p := mustParse(t, "*")
	for _, u := range []string{srv.URL, "http://localhost:" + srv.port, "http://[::ffff:127.0.0.1]:" + srv.port} {
		if body, err := get(t, p, u); err != nil || body != "secret" {
			t.Errorf("%s: %q, %v", u, body, err)
		}
	}
}

// TestClientEntriesOpenWhatTheyName: CIDR, HOST and HOST:PORT entries
// through real connections.
func TestClientEntriesOpenWhatTheyName(t *testing.T) {
	t.Parallel()
	a, b := listen(t, nil), listen(t, nil)
	byAddr := func(l *listener) string { return "http://127.0.0.1:" + l.port + "/" }
	byName := func(l *listener) string { return "http://localhost:" + l.port + "/" }
	cases := []struct {
		entry       string
		open, shut  []string
		description string
	}{
		{"127.0.0.1:" + a.port, []string{byAddr(a), byName(a)}, []string{byAddr(b), byName(b)}, "ADDRESS:PORT"},
		{"localhost:" + a.port, []string{byName(a)}, []string{byAddr(a), byName(b)}, "HOST:PORT"},
		{"localhost", []string{byName(a), byName(b)}, []string{byAddr(a), byAddr(b)}, "HOST"},
		{"127.0.0.0/8", []string{byAddr(a), byName(b), "http://[::ffff:127.0.0.1]:" + a.port + "/"}, nil, "CIDR"},
		{"127.0.0.2/32", nil, []string{byAddr(a), byName(a)}, "CIDR next to it"},
	}
	for _, c := range cases {
		p := mustParse(t, c.entry)
		for _, u := range c.open {
			if body, err := get(t, p, u); err != nil || body != "secret" {
				t.Errorf("%s %q: %s: %q, %v", c.description, c.entry, u, body, err)
			}
		}
		for _, u := range c.shut {
			if _, err := get(t, p, u); err == nil {
				t.Errorf("%s %q: %s was reached", c.description, c.entry, u)
			} else if Refused(err, "GET", u) == nil {
				t.Errorf("%s %q: %s: %v, want a refusal", c.description, c.entry, u, err)
			}
		}
	}
}

// TestProxiesCannotBypassTheCheck: a proxy would dial for flowd, out of
// the check's sight, so a checking client uses none.
func TestProxiesCannotBypassTheCheck(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("https_proxy", "http://127.0.0.1:1")
	if tr := Default().Client(time.Second).Transport.(*http.Transport); tr.Proxy != nil {
		t.Error("a checking client uses a proxy")
	}
	if got := Default().IgnoredProxyVariables(); strings.Join(got, " ") != "HTTP_PROXY https_proxy" {
		t.Errorf("IgnoredProxyVariables = %q", got)
	}
	if tr := Unrestricted().Client(time.Second).Transport.(*http.Transport); tr.Proxy == nil {
		t.Error("an unrestricted client ignores the environment's proxies")
	}
	if got := Unrestricted().IgnoredProxyVariables(); got != nil {
		t.Errorf("unrestricted: IgnoredProxyVariables = %q", got)
	}
}
