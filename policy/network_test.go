package policy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParseNetworkEntry(t *testing.T) {
	good := map[string]string{
		"example.com":                 "example.com",
		"API.Anthropic.com":           "api.anthropic.com",
		"*.example.com":               "*.example.com",
		"*.example.com:443":           "*.example.com:443",
		"localhost":                   "localhost",
		"my-host.internal:80":         "my-host.internal:80",
		"10.0.0.0/8:5432":             "10.0.0.0/8:5432",
		"::ffff:10.0.0.0/104":         "10.0.0.0/8",
		"::ffff:10.1.2.3":             "10.1.2.3",
		"[::]":                        "[::]",
		"10.0.0.0/8":                  "10.0.0.0/8",
		"10.1.2.3/8":                  "10.0.0.0/8",
		"192.0.2.1":                   "192.0.2.1",
		"192.0.2.1:8080":              "192.0.2.1:8080",
		"2001:db8::1":                 "[2001:db8::1]",
		"[2001:db8::1]:443":           "[2001:db8::1]:443",
		"2001:db8::/32":               "2001:db8::/32",
		"xn--bcher-kva.example":       "xn--bcher-kva.example",
		"Bücher.example:443":          "xn--bcher-kva.example:443",
		"*.bücher.example":            "*.xn--bcher-kva.example",
		"127.0.0.1/32":                "127.0.0.1",
		"::1/128":                     "[::1]",
		"::1/128:8080":                "[::1]:8080",
		"0.0.0.0/0":                   "0.0.0.0/0",
		"::ffff:127.0.0.1":            "127.0.0.1",
		"203.0.113.7:443":             "203.0.113.7:443",
		"*.example.com:8443":          "*.example.com:8443",
		"r3---sn-abc.googlevideo.com": "r3---sn-abc.googlevideo.com",
	}
	for in, want := range good {
		e, err := ParseNetworkEntry(in)
		if err != nil {
			t.Errorf("ParseNetworkEntry(%q): %v", in, err)
			continue
		}
		if e.String() != want {
			t.Errorf("ParseNetworkEntry(%q).String() = %q, want %q", in, e.String(), want)
		}
	}
	bad := []string{
		"", "*", "*.", "*.*.com", "a.*.com", "http://example.com", "example.com/path", "example.com:",
		"example.com:0", "example.com:65536", "example.com:080", "example.com:http", "example.com.",
		"exa mple.com", "a..b", "-a.com", "a-.com", "1.2.3.4.5", "300.1.1.1", "10.0.0.0/40",
		"[2001:db8::1", "[10.0.0.1]:80", "[::1]x", "fe80::1%eth0", "a:b:c:d:e:f:g:h:i",
		"ex\x00ample.com", "ex\nample.com", "ex@mple.com", "*.com", "my_host.internal", "xn--0.example", "a..b.com",
		"0x7f.1", "10.0.0.0/8:0", "::ffff:0:0/90", "127.1", "010.0.0.1",
		string(make([]byte, 300)),
		"*example.com", "**.example.com", "example.*", "example.com:+1", "example.com:-1",
		"example.com:443:443", "2001:db8::1::443", "10.0.0.0/33", "10.0.0.0/", "/8", "10.0.0.0/8:",
		"fe80::1%eth0/64", "2130706433", "0177.0.0.1", "*.127.0.0.1", "user@example.com",
		"::ffff:0.0.0.0/8", "１２７.０.０.１", "xn--.example",
	}
	for _, in := range bad {
		if e, err := ParseNetworkEntry(in); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseNetworkEntry(%q) = %+v, %v; want an ErrInvalid error", in, e, err)
		}
	}
}

func TestNetworkEntryMatch(t *testing.T) {
	tests := []struct {
		entry, host string
		port        int
		want        bool
	}{
		{"example.com", "example.com", 443, true},
		{"example.com", "EXAMPLE.com.", 80, true},
		{"example.com", "www.example.com", 443, false},
		{"*.example.com", "www.example.com", 443, true},
		{"*.example.com", "a.b.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "badexample.com", 443, false},
		{"example.com:443", "example.com", 80, false},
		{"10.0.0.0/8", "10.2.3.4", 22, true},
		{"10.0.0.0/8", "11.0.0.1", 22, false},
		{"10.0.0.0/8", "ten.example", 22, false},
		{"192.0.2.1:80", "192.0.2.1", 80, true},
		{"192.0.2.1:80", "192.0.2.1", 81, false},
		{"2001:db8::/32", "[2001:db8::5]", 443, true},
		{"example.com", "10.0.0.1", 443, false},
	}
	for _, tt := range tests {
		e, err := ParseNetworkEntry(tt.entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.MatchHost(tt.host, tt.port); got != tt.want {
			t.Errorf("%q.MatchHost(%q, %d) = %v, want %v", tt.entry, tt.host, tt.port, got, tt.want)
		}
	}
	e, _ := ParseNetworkEntry("10.0.0.0/8")
	if !e.MatchAddr(netip.MustParseAddr("::ffff:10.1.1.1"), 1) {
		t.Error("IPv4-mapped IPv6 address did not match its IPv4 CIDR")
	}
}

// Match is what the egress proxy uses on normalised targets.
func TestNetworkEntryMatchNormalized(t *testing.T) {
	tests := []struct {
		entry, host string
		port        int
		want        bool
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
		{"10.0.0.0/8", "10.1.2.3", 443, true},
		{"10.0.0.0/8", "[::ffff:10.1.2.3]", 443, true},
		{"10.0.0.0/8:5432", "10.1.2.3", 443, false},
		{"example.com", "10.1.2.3", 443, false},
		{"[2001:db8::1]:443", "[2001:db8::1]", 443, true},
	}
	for _, tc := range tests {
		e, err := ParseNetworkEntry(tc.entry)
		if err != nil {
			t.Fatal(err)
		}
		h, err := NormalizeHost(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Match(h, tc.port); got != tc.want {
			t.Errorf("%q matches %s:%d = %v, want %v", tc.entry, tc.host, tc.port, got, tc.want)
		}
	}
}
