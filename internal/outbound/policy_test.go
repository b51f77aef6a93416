package outbound

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// decide runs p's check for a URL host and a dialled address, with this
// host's interfaces given as local.
func decide(t *testing.T, p *Policy, host, dialled string, local ...string) error {
	t.Helper()
	p.localAddrs = func() []netip.Addr {
		out := make([]netip.Addr, len(local))
		for i, l := range local {
			out[i] = netip.MustParseAddr(l)
		}
		return out
	}
	return p.check(host, netip.MustParseAddrPort(dialled))
}

func TestDefaultRefusesWhatIsNotGloballyReachable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dialled string
		what    string // "" when the call may go
	}{
		{"127.0.0.1:80", "a loopback address"},
		{"127.255.0.9:80", "a loopback address"},
		{"[::1]:80", "a loopback address"},
		{"[::ffff:127.0.0.1]:80", "a loopback address"},
		{"0.0.0.0:80", `an unspecified ("this network") address`},
		{"0.1.2.3:80", `an unspecified ("this network") address`},
		{"[::]:80", "an unspecified address"},
		{"[::ffff:0.0.0.0]:80", `an unspecified ("this network") address`},
		{"10.1.2.3:80", "a private address"},
		{"172.16.0.1:80", "a private address"},
		{"172.31.255.255:80", "a private address"},
		{"192.168.1.1:80", "a private address"},
		{"[::ffff:10.0.0.1]:80", "a private address"},
		{"[fc00::1]:80", "a private (unique local) address"},
		{"[fd12:3456::1]:80", "a private (unique local) address"},
		{"[fec0::1]:80", "a private (site-local) address"},
		{"100.64.0.1:80", "a shared (carrier-grade NAT) address"},
		{"169.254.1.1:80", "a link-local address"},
		{"[fe80::1]:80", "a link-local address"},
		{"[fe80::1%eth0]:80", "a link-local address"},
		{"[::ffff:169.254.169.254]:80", "a cloud metadata address"},
		{"169.254.169.254:80", "a cloud metadata address"},
		{"169.254.170.2:80", "a cloud metadata address"},
		{"[fd00:ec2::254]:80", "a cloud metadata address"},
		{"100.100.100.200:80", "a cloud metadata address"},
		{"192.0.0.192:80", "a cloud metadata address"},
		{"192.0.0.8:80", "a reserved (IETF protocol) address"},
		{"224.0.0.1:80", "a multicast address"},
		{"239.255.255.250:80", "a multicast address"},
		{"[ff02::1]:80", "a multicast address"},
		{"255.255.255.255:80", "a reserved address"},
		{"240.0.0.1:80", "a reserved address"},
		{"192.0.2.1:80", "a documentation address"},
		{"[2001:db8::1]:80", "a documentation address"},
		{"198.18.0.1:80", "a benchmarking address"},
		{"[::127.0.0.1]:80", "an IPv4-compatible address"},
		{"[64:ff9b::7f00:1]:80", "a NAT64 address of 127.0.0.1, a loopback address"},
		{"[64:ff9b::a9fe:a9fe]:80", "a NAT64 address of 169.254.169.254, a cloud metadata address"},
		{"[64:ff9b:1::1]:80", "a local-use NAT64 address"},
		{"[2002:7f00:1::1]:80", "a 6to4 address of 127.0.0.1, a loopback address"},
		{"[2002:c0a8:101::1]:80", "a 6to4 address of 192.168.1.1, a private address"},
		{"[2001:0:4136:e378::1]:80", "a Teredo tunnel address"},
		{"[100::1]:80", "a discard-only address"},
		// Globally reachable: allowed.
		{"93.184.215.14:443", ""},
		{"8.8.8.8:53", ""},
		{"172.32.0.1:80", ""},
		{"100.128.0.1:80", ""},
		{"[2606:4700::1111]:443", ""},
		{"[::ffff:8.8.8.8]:80", ""},
		{"[64:ff9b::808:808]:80", ""}, // NAT64 of 8.8.8.8
		{"[2002:808:808::1]:80", ""},  // 6to4 of 8.8.8.8
	}
	for _, c := range cases {
		err := decide(t, Default(), "example.com", c.dialled)
		if c.what == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.dialled, err)
			}
			continue
		}
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.What != c.what {
			t.Errorf("%s: got %v, want refused as %s", c.dialled, err, c.what)
		}
	}
}

func TestRefusalNamesTheAddressAndTheFlag(t *testing.T) {
	t.Parallel()
	err := decide(t, Default(), "127.0.0.1", "127.0.0.1:8080")
	if want := "outbound call refused: 127.0.0.1:8080 is a loopback address; flowd serve --outbound-allow opens it"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	// A name is shown beside the address it resolved to.
	err = decide(t, Default(), "Metadata.Google.Internal.", "169.254.169.254:80")
	if want := "outbound call refused: 169.254.169.254:80 (metadata.google.internal) is a cloud metadata address; flowd serve --outbound-allow opens it"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	// The mapped form is reported unmapped: the address it reaches.
	err = decide(t, Default(), "::ffff:127.0.0.1", "[::ffff:127.0.0.1]:80")
	if want := "outbound call refused: 127.0.0.1:80 is a loopback address; flowd serve --outbound-allow opens it"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestAddressesOfThisHostAreRefused(t *testing.T) {
	t.Parallel()
	// A public address on one of this host's interfaces reaches services
	// bound to every interface (the flowd API among them).
	err := decide(t, Default(), "flowd.example.com", "203.1.113.7:8080", "127.0.0.1", "203.1.113.7")
	if want := "outbound call refused: 203.1.113.7:8080 (flowd.example.com) is an address of this host; flowd serve --outbound-allow opens it"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if err := decide(t, Default(), "other.example.com", "203.1.113.8:8080", "127.0.0.1", "203.1.113.7"); err != nil {
		t.Errorf("another public address: %v", err)
	}
	if err := decide(t, mustParse(t, "203.1.113.7:8080"), "", "203.1.113.7:8080", "203.1.113.7"); err != nil {
		t.Errorf("opened by an entry: %v", err)
	}
}

func mustParse(t *testing.T, entries ...string) *Policy {
	t.Helper()
	p, err := Parse(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEntriesOpenExactlyWhatTheyName: each kind of entry opens its
// addresses, names or ports, and nothing next to them.
func TestEntriesOpenExactlyWhatTheyName(t *testing.T) {
	t.Parallel()
	type call struct {
		host, dialled string
		open          bool
	}
	cases := []struct {
		entries []string
		calls   []call
	}{
		{[]string{"10.1.0.0/16"}, []call{
			{"10.1.2.3", "10.1.2.3:80", true},
			{"api.internal", "10.1.255.255:9000", true},
			{"10.2.0.1", "10.2.0.1:80", false},
			{"10.0.255.255", "10.0.255.255:80", false},
			{"::ffff:10.1.0.1", "[::ffff:10.1.0.1]:80", true}, // the same address, mapped
		}},
		{[]string{"10.1.2.3/8"}, []call{ // host bits are dropped: the /8 is named
			{"10.200.0.1", "10.200.0.1:80", true},
			{"11.0.0.1", "11.0.0.1:80", true}, // public anyway
			{"192.168.0.1", "192.168.0.1:80", false},
		}},
		{[]string{"::ffff:10.0.0.0/104"}, []call{ // a mapped CIDR is its IPv4 CIDR
			{"10.9.9.9", "10.9.9.9:80", true},
			{"192.168.0.1", "192.168.0.1:80", false},
		}},
		{[]string{"fd00::/8"}, []call{
			{"fd00::2", "[fd00::2]:80", true},
			{"fc00::2", "[fc00::2]:80", false},
		}},
		{[]string{"127.0.0.1"}, []call{ // an address: any port, that address only
			{"127.0.0.1", "127.0.0.1:1", true},
			{"localhost", "127.0.0.1:8080", true},
			{"::ffff:127.0.0.1", "[::ffff:127.0.0.1]:8080", true},
			{"127.0.0.2", "127.0.0.2:8080", false},
			{"::1", "[::1]:8080", false},
		}},
		{[]string{"[::1]"}, []call{
			{"::1", "[::1]:8080", true},
			{"127.0.0.1", "127.0.0.1:8080", false},
		}},
		{[]string{"127.0.0.1:8080"}, []call{ // ADDRESS:PORT: that port only
			{"127.0.0.1", "127.0.0.1:8080", true},
			{"localhost", "127.0.0.1:8080", true},
			{"127.0.0.1", "127.0.0.1:8081", false},
		}},
		{[]string{"[::1]:8080"}, []call{
			{"::1", "[::1]:8080", true},
			{"::1", "[::1]:8081", false},
		}},
		{[]string{"Api.Internal."}, []call{ // HOST: that name, any port, whatever it resolves to
			{"api.internal", "10.0.0.5:443", true},
			{"API.INTERNAL", "10.0.0.5:80", true},
			{"api.internal.", "10.0.0.5:80", true},
			{"other.internal", "10.0.0.5:443", false}, // the same address under another name
			{"10.0.0.5", "10.0.0.5:443", false},       // or by address
			{"x.api.internal", "10.0.0.6:443", false}, // no subdomains
		}},
		{[]string{"api.internal:08443"}, []call{ // HOST:PORT: that name and port only
			{"api.internal", "10.0.0.5:8443", true},
			{"api.internal", "10.0.0.5:443", false},
		}},
		{[]string{"localhost"}, []call{
			{"localhost", "127.0.0.1:8080", true},
			{"localhost", "[::1]:8080", true},
			{"127.0.0.1", "127.0.0.1:8080", false},
		}},
		{[]string{"10.0.0.1, api.internal:8443", "fd00::/8"}, []call{ // comma-separated and repeated
			{"10.0.0.1", "10.0.0.1:80", true},
			{"api.internal", "10.0.0.5:8443", true},
			{"fd00::9", "[fd00::9]:80", true},
			{"10.0.0.2", "10.0.0.2:80", false},
		}},
		{[]string{"*"}, []call{
			{"127.0.0.1", "127.0.0.1:80", true},
			{"169.254.169.254", "169.254.169.254:80", true},
		}},
		{[]string{"10.0.0.1", "*"}, []call{
			{"192.168.0.1", "192.168.0.1:80", true},
		}},
		{[]string{"", " , "}, []call{ // blank entries are skipped
			{"127.0.0.1", "127.0.0.1:80", false},
		}},
	}
	for _, c := range cases {
		p := mustParse(t, c.entries...)
		for _, call := range c.calls {
			err := decide(t, p, call.host, call.dialled)
			if call.open && err != nil {
				t.Errorf("%q: %s → %s refused: %v", c.entries, call.host, call.dialled, err)
			}
			if !call.open && err == nil {
				t.Errorf("%q: %s → %s not refused", c.entries, call.host, call.dialled)
			}
		}
	}
}

// TestLoopbackEntries: the entries the demo adds open loopback, in every
// form, and nothing else.
func TestLoopbackEntries(t *testing.T) {
	t.Parallel()
	p := mustParse(t, append([]string{"api.internal"}, Loopback...)...)
	for _, c := range []struct{ host, dialled string }{
		{"127.0.0.1", "127.0.0.1:8080"}, {"localhost", "127.0.0.1:1"}, {"127.1.2.3", "127.1.2.3:80"}, {"::1", "[::1]:8080"},
		{"::ffff:127.0.0.1", "[::ffff:127.0.0.1]:80"}, {"api.internal", "10.0.0.1:80"},
	} {
		if err := decide(t, p, c.host, c.dialled); err != nil {
			t.Errorf("%s → %s: %v", c.host, c.dialled, err)
		}
	}
	for _, dialled := range []string{"10.0.0.1:80", "0.0.0.0:80", "[::]:80", "169.254.169.254:80"} {
		if err := decide(t, p, "x.example", dialled); err == nil {
			t.Errorf("the loopback entries opened %s", dialled)
		}
	}
}

func TestBadEntriesAreNamed(t *testing.T) {
	t.Parallel()
	cases := []struct{ entry, want string }{
		{"10.0.0.0/33", `"10.0.0.0/33" is not a CIDR such as 10.0.0.0/8 or fd00::/8`},
		{"example.com/8", `"example.com/8" is not a CIDR such as 10.0.0.0/8 or fd00::/8`},
		{"http://10.0.0.1", `"http://10.0.0.1" is a URL; give a CIDR, HOST or HOST:PORT`},
		{"*.example.com", `"*.example.com": wildcards are not supported; "*" alone opens every address, else name each host or CIDR`},
		{"api.internal:https", `"api.internal:https": the port must be a number from 1 to 65535`},
		{"api.internal:0", `"api.internal:0": the port must be a number from 1 to 65535`},
		{"10.0.0.1:70000", `"10.0.0.1:70000": the port must be a number from 1 to 65535`},
		{"exa mple.com", `"exa mple.com" is not a CIDR, HOST or HOST:PORT (a host name has letters, digits, '-', '.' and '_')`},
		{"user@host:80", `"user@host:80": "user@host" is not a CIDR, HOST or HOST:PORT (a host name has letters, digits, '-', '.' and '_')`},
		{"fe80::1%eth0", `"fe80::1%eth0": addresses with a zone are not supported`},
		{"[fe80::1%eth0]:80", `"[fe80::1%eth0]:80": addresses with a zone are not supported`},
		{":80", `":80": "" is not a CIDR, HOST or HOST:PORT`},
	}
	for _, c := range cases {
		_, err := Parse([]string{c.entry})
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v, want %s", c.entry, err, c.want)
		}
	}
	// Every bad entry is named at once.
	_, err := Parse([]string{"10.0.0.0/8,bad host", "x:y"})
	if err == nil || !strings.Contains(err.Error(), `"bad host"`) || !strings.Contains(err.Error(), `"x:y"`) {
		t.Errorf("got %v, want both bad entries named", err)
	}
}
