package outbound

import "net/netip"

// addressRange is a range of addresses refused unless opened, with what it
// is, as an error names it ("a loopback address").
type addressRange struct {
	prefix netip.Prefix
	what   string
}

// refusedRanges are the addresses no server-side call reaches by default:
// every range that is not globally reachable on the Internet (the IANA
// special-purpose registries), so that a definition cannot reach this host,
// its private networks, or a cloud's metadata service. IPv4-mapped IPv6
// addresses are unmapped before they are looked up; NAT64 and 6to4
// addresses are judged by the IPv4 address they carry (see classify).
var refusedRanges = []addressRange{
	// IPv4.
	{netip.MustParsePrefix("0.0.0.0/8"), `an unspecified ("this network") address`}, // Linux connects 0.0.0.0 to this host
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved (IETF protocol) address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"}, // with the broadcast address 255.255.255.255
	// IPv6.
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"}, // deprecated; never routed
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo tunnel address"}, // carries an obfuscated IPv4 address
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a private (site-local) address"}, // deprecated
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// metadataAddresses are the instance metadata services of the clouds: all
// are inside a refused range already; they are listed to name them.
var metadataAddresses = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, Azure, GCP, OpenStack, Oracle, DigitalOcean…
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("169.254.170.23"):  true, // AWS EKS pod identity
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS, over IPv6
	netip.MustParseAddr("fd00:ec2::23"):    true, // AWS EKS pod identity, over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud Classic
}

// Prefixes whose addresses carry an IPv4 address that a translator or
// tunnel on the way would dial.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// classify says what a refused address is ("a loopback address"), or ""
// for an address a call may reach. a must be unmapped.
func classify(a netip.Addr) string {
	a = a.WithZone("")
	if metadataAddresses[a] {
		return "a cloud metadata address"
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64Prefix.Contains(a):
			return carried("NAT64", netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return carried("6to4", netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, r := range refusedRanges {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	return ""
}

// carried judges a NAT64 or 6to4 address by the IPv4 address it carries.
func carried(kind string, v4 netip.Addr) string {
	if what := classify(v4); what != "" {
		return "a " + kind + " address of " + v4.String() + ", " + what
	}
	return ""
}
