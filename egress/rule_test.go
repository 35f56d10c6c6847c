package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func TestParseRule(t *testing.T) {
	ok := []struct {
		in   string
		want Rule
	}{
		{"example.com", Rule{Kind: RuleName, Name: "example.com"}},
		{"Example.COM.", Rule{Kind: RuleName, Name: "example.com"}},
		{"example.com:443", Rule{Kind: RuleName, Name: "example.com", Port: 443}},
		{"*.example.com", Rule{Kind: RuleWildcard, Name: "example.com"}},
		{"*.example.com:8443", Rule{Kind: RuleWildcard, Name: "example.com", Port: 8443}},
		{"bücher.example", Rule{Kind: RuleName, Name: "xn--bcher-kva.example"}},
		{"10.0.0.0/8", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("10.0.0.0/8")}},
		{"10.1.2.3/8", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("10.0.0.0/8")}},
		{"127.0.0.1/32", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("127.0.0.1/32")}},
		{"::1/128", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("::1/128")}},
		{"::ffff:10.0.0.0/104", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("10.0.0.0/8")}},
		{"203.0.113.7", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("203.0.113.7/32")}},
		{"203.0.113.7:443", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("203.0.113.7/32"), Port: 443}},
		{"[2001:db8::1]", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("2001:db8::1/128")}},
		{"[2001:db8::1]:443", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("2001:db8::1/128"), Port: 443}},
		{"10.0.0.0/8:5432", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 5432}},
		{"::1/128:8080", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("::1/128"), Port: 8080}},
		{"2001:db8::1", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("2001:db8::1/128")}},
		{"::ffff:127.0.0.1", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("127.0.0.1/32")}},
		{"0.0.0.0/0", Rule{Kind: RulePrefix, Prefix: netip.MustParsePrefix("0.0.0.0/0")}},
	}
	for _, tc := range ok {
		got, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		tc.want.Raw = tc.in
		if got != tc.want {
			t.Errorf("ParseRule(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	bad := []string{
		"", "*", "*.com", "*.", "*example.com", "a.*.example.com", "**.example.com", "example.*",
		"example.com:", "example.com:0", "example.com:65536", "example.com:080", "example.com:+1",
		"example.com:-1", "example.com:http", "example.com:443:443", "fe80::1%eth0", "2001:db8::1::443",
		"[::1", "[::1]x", "10.0.0.0/33", "10.0.0.0/", "/8", "10.0.0.0/8:", "10.0.0.0/8:0", "fe80::1%eth0/64",
		"2130706433", "0177.0.0.1", "127.1", "*.127.0.0.1", "exa mple.com", "example.com\x00",
		"http://example.com", "example.com/path", "user@example.com", "::ffff:0.0.0.0/8",
	}
	for _, in := range bad {
		r, err := ParseRule(in)
		if err == nil {
			t.Errorf("ParseRule(%q) = %+v, want error", in, r)
			continue
		}
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("ParseRule(%q): %v does not wrap ErrInvalid", in, err)
		}
	}
}

func TestRuleMatchName(t *testing.T) {
	tests := []struct {
		rule, name string
		port       uint16
		want       bool
	}{
		{"example.com", "example.com", 443, true},
		{"example.com", "example.com", 22, true},
		{"example.com", "www.example.com", 443, false},
		{"example.com", "example.com.evil.net", 443, false},
		{"example.com", "notexample.com", 443, false},
		{"example.com:443", "example.com", 443, true},
		{"example.com:443", "example.com", 80, false},
		// "*.example.com" covers every name below it, not the name itself.
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "a.example.com", 443, true},
		{"*.example.com", "a.b.example.com", 443, true},
		{"*.example.com", "aexample.com", 443, false},
		{"*.example.com", "example.com.evil.net", 443, false},
		{"*.example.com", "a.example.com.evil.net", 443, false},
		{"*.example.com:443", "a.example.com", 80, false},
		{"10.0.0.0/8", "example.com", 443, false},
	}
	for _, tc := range tests {
		r, err := ParseRule(tc.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.matchName(tc.name, tc.port); got != tc.want {
			t.Errorf("%q matches %s:%d = %v, want %v", tc.rule, tc.name, tc.port, got, tc.want)
		}
	}
}

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
		h, err := NormalizeHost(tc.host)
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
