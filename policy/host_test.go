package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestNormalizeHost(t *testing.T) {
	name := func(s string) Host { return Host{Name: s} }
	ip := func(s string) Host { return Host{Addr: netip.MustParseAddr(s)} }
	ok := []struct {
		in   string
		want Host
	}{
		{"example.com", name("example.com")},
		{"EXAMPLE.com", name("example.com")},
		{"example.com.", name("example.com")},
		{"api.anthropic.com", name("api.anthropic.com")},
		{"r3---sn-abc.googlevideo.com", name("r3---sn-abc.googlevideo.com")},
		{"xn--bcher-kva.example", name("xn--bcher-kva.example")},
		{"bücher.example", name("xn--bcher-kva.example")},
		{"BÜCHER.example", name("xn--bcher-kva.example")},
		{"ｅｘａｍｐｌｅ.com", name("example.com")}, // full-width letters map
		{"a.b.c.d.e", name("a.b.c.d.e")},
		{"localhost", name("localhost")},
		{"1example.com", name("1example.com")},
		{"deadbeef", name("deadbeef")},    // hex without 0x is a name
		{"⑫.example", name("12.example")}, // compatibility mapping, then a name
		{"127.0.0.1", ip("127.0.0.1")},
		{"1.2.3.4", ip("1.2.3.4")},
		{"255.255.255.255", ip("255.255.255.255")},
		{"１２７.０.０.１", ip("127.0.0.1")}, // full-width digits: the IP, not a name
		{"127。0。0。1", ip("127.0.0.1")}, // ideographic full stops
		{"[::1]", ip("::1")},
		{"[2001:db8::1]", ip("2001:db8::1")},
		{"[::ffff:127.0.0.1]", ip("127.0.0.1")}, // IPv4-mapped: unmapped
		{"[::ffff:7f00:1]", ip("127.0.0.1")},
		{"[::FFFF:A9FE:A9FE]", ip("169.254.169.254")},
	}
	for _, tc := range ok {
		got, err := NormalizeHost(tc.in)
		if err != nil {
			t.Errorf("NormalizeHost(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("NormalizeHost(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	bad := []string{
		"",
		".",
		"..",
		"example.com..",
		".example.com",
		"a..b",
		"exa mple.com",
		"example.com ",
		" example.com",
		"example.com\x00",
		"evil.com\x00.api.example.com",
		"api.example.com\x00evil.com",
		"example.com\r\nX: y",
		"example.com\t",
		"exa\x7fmple.com",
		"exa\x01mple.com",
		"\xff\xfe",
		"example.com/",
		"example.com/path",
		"user@example.com",
		"example.com:443",
		"example.com#",
		"example.com?",
		"exa%00mple.com",
		"exa%2ecom",
		"under_score.example.com",
		"-leading.example.com",
		"trailing-.example.com",
		strings.Repeat("a", 64) + ".com",
		strings.Repeat("a.", 127) + "com",
		"*.example.com",
		"example.*",
		"[::1",
		"::1",
		"[fe80::1%eth0]",
		"[fe80::1%25eth0]",
		"[127.0.0.1]",
		"[example.com]",
		"[::1]:80",
		// IP literals in odd forms: refused, never guessed.
		"2130706433", // decimal 127.0.0.1
		"0x7f000001", // hex
		"0x7f.0.0.1", // hex octet
		"0177.0.0.1", // octal octet
		"0177.0000.0000.0001",
		"127.1",              // short form
		"127.0.1",            // short form
		"127.000.0.1",        // leading zeros
		"127.0.0.01",         // leading zero
		"017700000001",       // octal whole
		"4294967295",         // decimal broadcast
		"169.254.43518",      // short metadata
		"0xa9fea9fe",         // hex metadata
		"2852039166",         // decimal metadata
		"1.2.3.4.5",          // five octets
		"256.0.0.1",          // out of range
		"example.0x10",       // ends in a hex number
		"example.123",        // ends in a number
		"0x",                 // empty hex
		"１２７.１",              // full-width short form
		"a\u00adb..example",  // soft hyphen mapped away, empty label
		"xn--.example",       // bad punycode
		"xn--a-ecp.ru\u200d", // joiner
	}
	for _, in := range bad {
		h, err := NormalizeHost(in)
		if err == nil {
			t.Errorf("NormalizeHost(%q) = %+v, want error", in, h)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("NormalizeHost(%q) error %v does not wrap ErrInvalid", in, err)
		}
	}
}

// Normalising a canonical form is the identity.
func TestNormalizeHostIdempotent(t *testing.T) {
	for _, in := range []string{"Example.COM.", "bücher.example", "[::ffff:1.2.3.4]", "１２７.０.０.１", "[2001:DB8::1]"} {
		h, err := NormalizeHost(in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := NormalizeHost(canonicalInput(h))
		if err != nil || again != h {
			t.Errorf("%q: %+v then %+v (%v)", in, h, again, err)
		}
	}
}

func canonicalInput(h Host) string {
	if h.IsIP() && h.Addr.Is6() {
		return "[" + h.Addr.String() + "]"
	}
	return h.String()
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"example.com", "EXAMPLE.com.", "bücher.example", "2130706433", "0177.0.0.1",
		"127.1", "[::ffff:127.0.0.1]", "a\x00b", "１２７.０.０.１", "xn--bcher-kva.example", "[fe80::1%eth0]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := NormalizeHost(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if h.IsIP() == (h.Name != "") {
			t.Fatalf("exactly one of Name and Addr must be set: %+v", h)
		}
		if h.IsIP() {
			if h.Addr.Is4In6() || h.Addr.Zone() != "" {
				t.Fatalf("address not canonical: %v", h.Addr)
			}
		} else {
			if err := checkLDH(h.Name); err != nil {
				t.Fatalf("name %q not LDH: %v", h.Name, err)
			}
			if _, err := netip.ParseAddr(h.Name); err == nil {
				t.Fatalf("name %q parses as an IP", h.Name)
			}
			last := h.Name[strings.LastIndexByte(h.Name, '.')+1:]
			if isNumericLabel(last) {
				t.Fatalf("name %q ends in a number", h.Name)
			}
		}
		again, err := NormalizeHost(canonicalInput(h))
		if err != nil || again != h {
			t.Fatalf("not idempotent: %q -> %+v -> %+v (%v)", s, h, again, err)
		}
	})
}
