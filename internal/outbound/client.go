package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// Client returns an HTTP client whose connections p checks, with the
// given overall timeout per request. While p checks anything the client
// uses no proxy: a proxy would dial on flowd's behalf, out of the check's
// sight, so HTTP_PROXY and HTTPS_PROXY are ignored (IgnoredProxyVariables
// lists those set). An unrestricted policy's client honours them, as Go's
// default client does.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if !p.unrestricted {
		t.Proxy = nil
		t.DialContext = p.dial
	}
	return &http.Client{Timeout: timeout, Transport: t}
}

// dial connects to address ("host:port", as the request's URL gave it)
// after checking each address DNS gave for it, just before the connect:
// the address checked is the one dialled.
func (p *Policy) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{
		Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, _, dialled string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(dialled)
			if err != nil {
				return fmt.Errorf("outbound call refused: cannot read the dialled address %q: %w", dialled, err)
			}
			return p.check(host, ap)
		},
	}
	return d.DialContext(ctx, network, address)
}

// Refused returns nil when err, the error of a client of a Policy for a
// request, is no refusal; else an error wrapping the *RefusedError that
// names the request (method, sent URL) and, when the refused connection
// was a redirect's, the URL redirected to.
func Refused(err error, method, sent string) error {
	var refused *RefusedError
	if !errors.As(err, &refused) {
		return nil
	}
	shown := withoutPassword(sent)
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL != shown {
		return fmt.Errorf("%s %s (redirected to %s): %w", method, shown, ue.URL, refused)
	}
	return fmt.Errorf("%s %s: %w", method, shown, refused)
}

// withoutPassword shows rawURL as Go's client shows the URLs of its
// errors: with a password replaced by "***".
func withoutPassword(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	if _, ok := u.User.Password(); ok {
		return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
	}
	return u.String()
}

// proxyVariables are the variables Go's HTTP client reads its proxies from.
var proxyVariables = []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"}

// IgnoredProxyVariables lists the proxy variables set in the environment
// that the clients of p ignore (none when p is unrestricted), for a
// warning at start.
func (p *Policy) IgnoredProxyVariables() []string {
	if p.unrestricted {
		return nil
	}
	var set []string
	for _, v := range proxyVariables {
		if os.Getenv(v) != "" {
			set = append(set, v)
		}
	}
	return set
}
