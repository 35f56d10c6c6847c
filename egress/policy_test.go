package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func mustCompile(t *testing.T, mode string, allow, deny []string) *compiled {
	t.Helper()
	c, err := compileNetwork(policy.Network{Mode: mode, Allow: allow, Deny: deny})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckTarget(t *testing.T) {
	allow := []string{"api.example.com", "*.pypi.org", "files.example.com:443", "203.0.113.0/24", "[2001:db8::1]:443"}
	deny := []string{"evil.pypi.org", "203.0.113.66"}
	tests := []struct {
		mode   string
		allow  []string
		host   string
		port   uint16
		denied string // substring of the reason, "" for allowed
	}{
		{"allowlist", allow, "api.example.com", 443, ""},
		{"allowlist", allow, "api.example.com", 80, ""},
		{"allowlist", allow, "example.com", 443, "not in allow list"},
		{"allowlist", allow, "x.api.example.com", 443, "not in allow list"},
		{"allowlist", allow, "files.pypi.org", 443, ""},
		{"allowlist", allow, "pypi.org", 443, "not in allow list"},
		{"allowlist", allow, "evil.pypi.org", 443, "denied by rule evil.pypi.org"},
		{"allowlist", allow, "files.example.com", 443, ""},
		{"allowlist", allow, "files.example.com", 80, "not in allow list"},
		{"allowlist", allow, "203.0.113.5", 80, ""},
		{"allowlist", allow, "203.0.113.66", 80, "denied by rule"},
		{"allowlist", allow, "198.51.100.1", 80, "not in an allowed CIDR"},
		{"allowlist", allow, "[2001:db8::1]", 443, ""},
		{"allowlist", allow, "[2001:db8::1]", 80, "not in an allowed CIDR"},
		{"allowlist", nil, "api.example.com", 443, "allow list is empty"},
		{"none", allow, "api.example.com", 443, "mode none"},
		{"", allow, "api.example.com", 443, "mode none"},
		{"open", nil, "anything.example", 443, ""},
		{"open", nil, "evil.pypi.org", 443, "denied by rule"},
	}
	for _, tc := range tests {
		c := mustCompile(t, tc.mode, tc.allow, deny)
		h, err := policy.NormalizeHost(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		got := c.checkTarget(h, tc.port)
		if (got == "") != (tc.denied == "") || !strings.Contains(got, tc.denied) {
			t.Errorf("mode %q: %s:%d: got %q, want %q", tc.mode, tc.host, tc.port, got, tc.denied)
		}
	}
}

func TestCheckAddrSSRFGuard(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("198.18.7.7"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2a00:1450::1")}
	base := mustCompile(t, "allowlist", []string{"api.example.com"}, []string{"1.1.1.0/24"})
	withLoop := mustCompile(t, "allowlist", []string{"api.example.com", "127.0.0.1/32", "10.1.0.0/16:5432", "0.0.0.0/0", "::/0"}, nil)
	tests := []struct {
		c      *compiled
		addr   string
		port   uint16
		denied string
	}{
		{base, "93.184.216.34", 443, ""},
		{base, "2606:2800:220:1::1", 443, ""},
		{base, "127.0.0.1", 443, "loopback"},
		{base, "127.1.2.3", 443, "loopback"},
		{base, "::1", 443, "loopback"},
		{base, "::ffff:127.0.0.1", 443, "loopback"},
		{base, "169.254.169.254", 80, "link-local"},
		{base, "::ffff:169.254.169.254", 80, "link-local"},
		{base, "fe80::1", 80, "link-local"},
		{base, "10.0.0.1", 80, "private"},
		{base, "172.16.0.1", 80, "private"},
		{base, "172.31.255.255", 80, "private"},
		{base, "192.168.1.1", 80, "private"},
		{base, "100.64.0.1", 80, "carrier-grade NAT"},
		{base, "100.127.255.255", 80, "carrier-grade NAT"},
		{base, "fd00::1", 80, "unique local"},
		{base, "fc00::1", 80, "unique local"},
		{base, "0.0.0.0", 80, "unspecified"},
		{base, "::", 80, "unspecified"},
		{base, "224.0.0.1", 80, "multicast"},
		{base, "ff02::1", 80, "multicast"},
		{base, "255.255.255.255", 80, "reserved"},
		{base, "64:ff9b::7f00:1", 80, "NAT64"},
		{base, "::127.0.0.1", 80, "IPv4-compatible"},
		{base, "198.18.7.7", 80, "benchmarking"},
		{base, "8.8.8.8", 53, "address of this host"},
		{base, "2a00:1450::1", 443, "address of this host"},
		{base, "1.1.1.1", 443, "denied by rule 1.1.1.0/24"},
		{base, "172.32.0.1", 80, ""},
		{base, "100.128.0.1", 80, ""},
		// Only a CIDR that covers the address lifts the guard; /0 never does.
		{withLoop, "127.0.0.1", 8080, ""},
		{withLoop, "127.0.0.2", 8080, "loopback"},
		{withLoop, "::ffff:127.0.0.1", 8080, ""},
		{withLoop, "10.1.2.3", 5432, ""},
		{withLoop, "10.1.2.3", 22, "private"},
		{withLoop, "169.254.169.254", 80, "link-local"},
		{withLoop, "::1", 80, "loopback"},
	}
	for _, tc := range tests {
		got := tc.c.checkAddr(netip.MustParseAddr(tc.addr), tc.port, own)
		if (got == "") != (tc.denied == "") || !strings.Contains(got, tc.denied) {
			t.Errorf("%s:%d: got %q, want %q", tc.addr, tc.port, got, tc.denied)
		}
	}
}

func TestCompileNetworkErrors(t *testing.T) {
	for _, n := range []policy.Network{
		{Mode: "sometimes"},
		{Mode: "allowlist", Allow: []string{"*.com"}},
		{Mode: "allowlist", Deny: []string{"2130706433"}},
	} {
		if _, err := compileNetwork(n); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", n, err)
		}
	}
}

// FuzzCompileNetwork fuzzes the one network-entry parser
// (policy.ParseNetworkEntry) through the proxy: the proxy compiles exactly
// what a policy accepts (so a policy that passes `airlock policy check`
// never fails when the sandbox starts), and every accepted entry admits
// the targets it names, read by the proxy's own target normaliser.
func FuzzCompileNetwork(f *testing.F) {
	for _, s := range []string{
		"example.com", "API.Anthropic.com", "*.example.com:443", "localhost", "my-host.internal:80",
		"10.0.0.0/8:5432", "::ffff:10.0.0.0/104", "::ffff:10.1.2.3", "[::]", "192.0.2.1:8080",
		"2001:db8::1", "[2001:db8::1]:443", "2001:db8::/32", "xn--bcher-kva.example", "a.b.c.d.e.f",
		"Example.COM.", "*.com", "*", "2130706433", "127.1", "a..b", "-a.com", "a_b.example", "bücher.example",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, perr := policy.ParseNetworkEntry(s)
		c, cerr := compileNetwork(policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{s}})
		if (perr == nil) != (cerr == nil) {
			t.Fatalf("%q: policy says %v, the proxy %v", s, perr, cerr)
		}
		if perr != nil {
			if !errors.Is(cerr, sandbox.ErrInvalid) {
				t.Fatalf("%q: %v does not wrap ErrInvalid", s, cerr)
			}
			return
		}
		port := uint16(e.Port)
		if port == 0 {
			port = 443
		}
		target := func(name string) policy.Host {
			h, err := policy.NormalizeHost(name)
			if err != nil {
				t.Fatalf("%q: the proxy cannot read target %q of the entry: %v", s, name, err)
			}
			return h
		}
		switch {
		case e.Host != "" && e.Wildcard:
			if why := c.checkTarget(target("a."+e.Host), port); why != "" {
				t.Fatalf("%q: a name below it is refused: %s", s, why)
			}
			if c.checkTarget(target(e.Host), port) == "" {
				t.Fatalf("%q: the wildcard admits its apex", s)
			}
		case e.Host != "":
			if why := c.checkTarget(target(e.Host), port); why != "" {
				t.Fatalf("%q: its own name is refused: %s", s, why)
			}
		default:
			if why := c.checkTarget(policy.Host{Addr: e.Prefix.Addr()}, port); why != "" {
				t.Fatalf("%q: its own address is refused: %s", s, why)
			}
		}
	})
}
