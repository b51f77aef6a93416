package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Web pages in the user's browser can send requests to a flowd server on
// their machine or network. Two checks keep them from acting on it or reading
// it when no token stands in their way:
//
//   - DNS rebinding: a page on evil.example points evil.example at 127.0.0.1
//     and then reads the API as same-origin. Its requests carry
//     "Host: evil.example", so only Host values that name this server are
//     answered (421 otherwise).
//   - Cross-site writes: a page may POST to any URL without asking (a form,
//     or fetch with a text/plain body). The browser then sends the page's
//     Origin, so a state-changing request whose Origin is not the server
//     itself is refused (403). Requests without Origin (the CLI, curl,
//     SDKs) are not from a browser page and pass.

// AnyHost, as an allowed host, turns the Host check off: for servers behind
// a proxy that sends Host values nobody can list, and that require tokens
// (a rebinding page never has a token).
const AnyHost = "*"

// hostRule is one entry of Config.AllowedHosts: a host name or IP, with a
// port when the entry gave one.
type hostRule struct {
	host string // lower case, IPv6 without brackets
	port string // "" matches any port, and a Host without one
}

// parseAllowedHosts checks every entry of Config.AllowedHosts: "*", a host
// ("flowd.example.com", "10.0.0.5", "[::1]"), or a host:port.
func parseAllowedHosts(entries []string) (rules []hostRule, anyHost bool, err error) {
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == AnyHost {
			anyHost = true
			continue
		}
		r, err := parseHostRule(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed host %q: %w", e, err))
			continue
		}
		rules = append(rules, r)
	}
	return rules, anyHost, errors.Join(errs...)
}

func parseHostRule(e string) (hostRule, error) {
	if e == "" {
		return hostRule{}, errors.New("empty")
	}
	if strings.ContainsAny(e, "/@?# ") {
		return hostRule{}, errors.New(`want a host name or host:port as clients send it in the Host header (e.g. flowd.example.com or flowd.example.com:8080), not a URL`)
	}
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return hostRule{}, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
	} else if strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
		host = e[1 : len(e)-1]
	}
	host = strings.ToLower(host)
	if host == "" {
		return hostRule{}, errors.New("the host is empty")
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return hostRule{}, errors.New(`not a host or host:port (an IPv6 address with a port is written [::1]:8080)`)
	}
	return hostRule{host: host, port: port}, nil
}

// ValidateAllowedHosts reports every entry of hosts that Config.AllowedHosts
// would refuse, so a command line can be checked before anything starts.
func ValidateAllowedHosts(hosts []string) error {
	_, _, err := parseAllowedHosts(hosts)
	return err
}

// splitHost splits the value of a Host header into a lower-case host (IPv6
// without brackets) and its port, "" when it has none.
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h), p
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")), ""
}

// isLoopbackHost reports whether host names this machine in a way no other
// site's DNS can: "localhost" or a loopback IP address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed reports whether a request's Host names this server: a loopback
// name on any port, the listen address exactly, or an allowed host.
func (s *Server) hostAllowed(hostHeader string) bool {
	if s.anyHost {
		return true
	}
	host, port := splitHost(hostHeader)
	if host == "" {
		return false
	}
	if isLoopbackHost(host) {
		return true
	}
	if s.listenHost != "" && host == s.listenHost && port == s.listenPort {
		return true
	}
	for _, r := range s.allowedHosts {
		if host == r.host && (r.port == "" || port == r.port) {
			return true
		}
	}
	return false
}

// withHostCheck answers 421 to a request whose Host does not name this
// server, on every path: a rebinding page could read the dashboard and
// /metrics as well as /v1.
func (s *Server) withHostCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeErrorStatus(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"this server does not answer to Host %q: it answers to localhost, loopback addresses, its listen address and the hosts of --allowed-hosts", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// safeMethod reports whether method only reads (RFC 9110 §9.2.1), so a
// cross-site request with it changes nothing.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// withOriginCheck answers 403 to a state-changing request sent by a page of
// another origin. "Origin: null" (sandboxed frames, file: pages, redirects
// across sites) is another origin too.
func (s *Server) withOriginCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origins, ok := r.Header["Origin"]; ok && !safeMethod(r.Method) {
			if len(origins) != 1 || !sameOrigin(origins[0], r.Host) {
				writeErrorStatus(w, http.StatusForbidden, fmt.Sprintf(
					"cross-origin request refused: Origin %q is not this server (Host %q); pages of other sites cannot change workflows",
					strings.Join(origins, ", "), r.Host))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether origin (scheme://host[:port]) is the server the
// request was sent to, as named by its Host header. Browsers leave the
// scheme's default port out of both, but a port written out is equal too.
func sameOrigin(origin, hostHeader string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return strings.EqualFold(withoutDefaultPort(u.Host, u.Scheme), withoutDefaultPort(hostHeader, u.Scheme))
}

func withoutDefaultPort(hostport, scheme string) string {
	def := ":80"
	if scheme == "https" {
		def = ":443"
	}
	return strings.TrimSuffix(hostport, def)
}
