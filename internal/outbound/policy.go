// Package outbound is the policy of every call flowd makes to an address a
// definition names: http steps and Serverless Workflow `call: http` and
// `call: openapi` (the document fetch and the operation call). By default
// those calls may reach the Internet but not this host, its private
// networks or a cloud's metadata service; the operator opens what a
// workflow needs with --outbound-allow entries.
//
// The check runs on the address actually dialled, once DNS has answered,
// for every connection — every redirect hop included — so neither a name
// that resolves to a refused address (DNS rebinding) nor a redirect passes.
// The package owns the decision and the client that enforces it; it does
// not know workflows.
package outbound

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Policy decides which addresses outbound calls may dial. Build one with
// Default, Unrestricted or Parse.
type Policy struct {
	unrestricted bool
	prefixes     []netip.Prefix          // CIDR and bare address entries
	addrPorts    map[netip.AddrPort]bool // ADDRESS:PORT entries
	hosts        map[string]bool         // HOST entries: names, any port
	hostPorts    map[string]bool         // HOST:PORT entries of names ("name:port")
	// localAddrs lists the addresses of this host's interfaces [read from
	// the system at each check].
	localAddrs func() []netip.Addr
}

// Loopback are the entries that open this host's loopback addresses (and
// so `localhost`), for the demo and for tests that call local listeners.
var Loopback = []string{"127.0.0.0/8", "::1"}

// Default refuses every address that is not globally reachable (see
// refusedRanges) and every address of this host; it opens nothing.
func Default() *Policy {
	return &Policy{addrPorts: map[netip.AddrPort]bool{}, hosts: map[string]bool{}, hostPorts: map[string]bool{}, localAddrs: interfaceAddrs}
}

// Unrestricted checks nothing: calls reach any address, through the
// proxies the environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
func Unrestricted() *Policy { return &Policy{unrestricted: true} }

// Parse builds Default opened by entries: each "CIDR" (10.1.0.0/16), an
// address (10.1.2.3, ::1), "HOST" (a name, any port), "HOST:PORT"
// (a name or an address, that port only), or "*", which turns the policy
// off (Unrestricted). An entry may hold several, comma-separated; blank
// ones are skipped. The error names every bad entry.
func Parse(entries []string) (*Policy, error) {
	p := Default()
	var errs []error
	for _, entry := range entries {
		for _, e := range strings.Split(entry, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if err := p.open(e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// open adds one entry to p.
func (p *Policy) open(e string) error {
	switch {
	case e == "*":
		p.unrestricted = true
		return nil
	case strings.Contains(e, "*"):
		return fmt.Errorf("%q: wildcards are not supported; \"*\" alone opens every address, else name each host or CIDR", e)
	case strings.Contains(e, "://"):
		return fmt.Errorf("%q is a URL; give a CIDR, HOST or HOST:PORT", e)
	case strings.Contains(e, "/"):
		prefix, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or fd00::/8", e)
		}
		p.prefixes = append(p.prefixes, unmapPrefix(prefix.Masked()))
		return nil
	}
	if a, ok := parseAddr(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")); ok {
		if a.Zone() != "" {
			return fmt.Errorf("%q: addresses with a zone are not supported", e)
		}
		a = a.Unmap()
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		// Not HOST:PORT: a host name alone.
		name, err := hostName(e)
		if err != nil {
			return err
		}
		p.hosts[name] = true
		return nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", e)
	}
	if a, ok := parseAddr(host); ok {
		if a.Zone() != "" {
			return fmt.Errorf("%q: addresses with a zone are not supported", e)
		}
		p.addrPorts[netip.AddrPortFrom(a.Unmap(), uint16(n))] = true
		return nil
	}
	name, err := hostName(host)
	if err != nil {
		return fmt.Errorf("%q: %w", e, err)
	}
	p.hostPorts[net.JoinHostPort(name, strconv.Itoa(int(n)))] = true
	return nil
}

// check decides a connection to dialled for a request whose URL named
// host (a name, or the address itself). It returns nil or a
// *RefusedError.
func (p *Policy) check(host string, dialled netip.AddrPort) error {
	if p.unrestricted {
		return nil
	}
	a := dialled.Addr().Unmap().WithZone("")
	ap := netip.AddrPortFrom(a, dialled.Port())
	name := normalName(host)
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		name = "" // the URL named the address: no name entry applies
	}
	if name != "" && (p.hosts[name] || p.hostPorts[net.JoinHostPort(name, strconv.Itoa(int(ap.Port())))]) {
		return nil
	}
	if p.addrPorts[ap] {
		return nil
	}
	for _, prefix := range p.prefixes {
		if prefix.Contains(a) {
			return nil
		}
	}
	what := classify(a)
	if what == "" && p.localAddrs != nil {
		for _, local := range p.localAddrs() {
			if local.Unmap().WithZone("") == a {
				what = "an address of this host"
				break
			}
		}
	}
	if what == "" {
		return nil
	}
	return &RefusedError{Host: name, Addr: ap, What: what}
}

// RefusedError is a connection the policy refused, before any packet was
// sent to it.
type RefusedError struct {
	// Host is the name the request's URL gave ("" when it gave the address).
	Host string
	// Addr is the address the connection would have dialled.
	Addr netip.AddrPort
	// What the address is: "a loopback address", "a private address"…
	What string
}

func (e *RefusedError) Error() string {
	addr := e.Addr.String()
	if e.Host != "" {
		addr += " (" + e.Host + ")"
	}
	return fmt.Sprintf("outbound call refused: %s is %s; flowd serve --outbound-allow opens it", addr, e.What)
}

// parseAddr parses an IP address.
func parseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

// unmapPrefix turns a prefix of IPv4-mapped IPv6 addresses into the IPv4
// prefix that the dialled (unmapped) addresses are compared with.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// hostName checks a HOST entry and returns it in the form compared with
// URLs' hosts.
func hostName(s string) (string, error) {
	name := normalName(s)
	if name == "" {
		return "", fmt.Errorf("%q is not a CIDR, HOST or HOST:PORT", s)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return "", fmt.Errorf("%q is not a CIDR, HOST or HOST:PORT (a host name has letters, digits, '-', '.' and '_')", s)
		}
	}
	return name, nil
}

// normalName is a host name as compared: lower case, without the root's
// trailing dot.
func normalName(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// interfaceAddrs lists the addresses of this host's interfaces; none when
// they cannot be read.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
