package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/airlock-dev/airlock/sandbox"
)

// Host is a normalised connection target: exactly one of Name (a lower-case
// ASCII host name, no trailing dot) or Addr (an IP address; IPv4-mapped
// IPv6 addresses are unmapped to IPv4) is set.
type Host struct {
	Name string
	Addr netip.Addr
}

// IsIP reports whether h is an IP literal.
func (h Host) IsIP() bool { return h.Addr.IsValid() }

// String is the canonical form: the name, or the address (IPv6 without
// brackets).
func (h Host) String() string {
	if h.IsIP() {
		return h.Addr.String()
	}
	return h.Name
}

// idnaProfile is the one IDNA profile used for every name: UTS #46 lookup
// mapping (case folding, width mapping), STD3 ASCII rules, Bidi rule and DNS
// length checks. CheckHyphens is off because real host names such as
// "r3---sn-abc.googlevideo.com" carry "--" in positions 3-4; leading and
// trailing hyphens are still rejected by checkLDH.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.CheckHyphens(false),
	idna.StrictDomainName(true),
	idna.VerifyDNSLength(true),
	idna.Transitional(false),
)

const maxHostLen = 253

var errHost = errors.New("bad host")

// NormalizeHost turns a target host as a client sent it (in a CONNECT
// authority, an absolute URI, a Host header, a SOCKS5 domain or a TLS SNI)
// into its one canonical form, or rejects it. The rules:
//
//   - NUL, control bytes, space, DEL and invalid UTF-8 are rejected.
//   - "[v6]" is an IPv6 literal; zones are rejected; IPv4-mapped IPv6
//     (::ffff:a.b.c.d) becomes the IPv4 address, so it is matched and
//     guarded exactly like its canonical form.
//   - A dotted-quad IPv4 address in canonical form (no leading zeros) is an
//     IPv4 literal.
//   - Any other name whose last label is numeric (digits, or 0x and hex
//     digits) is rejected: "2130706433", "0177.0.0.1", "0x7f.1", "127.1",
//     "127.000.0.1". Such forms mean an IP address to some resolvers and
//     URL parsers and a name to others; no real name ends in a numeric
//     label, so refusing them closes the differential.
//   - Otherwise it is a name: one trailing dot is removed, then UTS #46
//     mapping (lower case, full-width forms, ...) and strict IDNA to ASCII
//     (punycode); the result must be letters, digits and hyphens in labels
//     of 1 to 63 bytes, no label starting or ending with a hyphen, at most
//     253 bytes. The mapped result is checked again for IP literals, so
//     "１２７.０.０.１" is the IPv4 literal 127.0.0.1, not a name.
func NormalizeHost(s string) (Host, error) {
	if s == "" {
		return Host{}, fmt.Errorf("normalize host: empty: %w", sandbox.ErrInvalid)
	}
	if len(s) > 4*maxHostLen {
		return Host{}, fmt.Errorf("normalize host: too long: %w", sandbox.ErrInvalid)
	}
	if !utf8.ValidString(s) {
		return Host{}, fmt.Errorf("normalize host %q: invalid UTF-8: %w", s, sandbox.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c == 0x7f {
			return Host{}, fmt.Errorf("normalize host %q: control byte or space: %w", s, sandbox.ErrInvalid)
		}
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Host{}, fmt.Errorf("normalize host %q: unterminated IPv6 literal: %w", s, sandbox.ErrInvalid)
		}
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return Host{}, fmt.Errorf("normalize host %q: bad IPv6 literal: %w", s, sandbox.ErrInvalid)
		}
		return Host{Addr: a.Unmap()}, nil
	}
	if strings.Contains(s, ":") {
		// Bare IPv6 (or host:port) where only a host may stand.
		return Host{}, fmt.Errorf("normalize host %q: colon outside brackets: %w", s, sandbox.ErrInvalid)
	}
	name := strings.TrimSuffix(s, ".")
	ascii, err := idnaProfile.ToASCII(name)
	if err != nil {
		return Host{}, fmt.Errorf("normalize host %q: idna: %v: %w", s, err, sandbox.ErrInvalid)
	}
	ascii = strings.ToLower(ascii)
	if h, ok, err := ipLiteral(ascii); ok || err != nil {
		if err != nil {
			return Host{}, fmt.Errorf("normalize host %q: %v: %w", s, err, sandbox.ErrInvalid)
		}
		return h, nil
	}
	if err := checkLDH(ascii); err != nil {
		return Host{}, fmt.Errorf("normalize host %q: %v: %w", s, err, sandbox.ErrInvalid)
	}
	return Host{Name: ascii}, nil
}

// ipLiteral reports whether s (already ASCII, no brackets) is a canonical
// IPv4 literal (ok), or an ambiguous numeric form (err).
func ipLiteral(s string) (Host, bool, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Is4() && a.Zone() == "" {
			return Host{Addr: a}, true, nil
		}
		return Host{}, false, errors.New("unexpected address form")
	}
	last := s
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		last = s[i+1:]
	}
	if isNumericLabel(last) {
		return Host{}, false, errors.New("non-canonical IP literal (decimal, octal, hex or short form)")
	}
	return Host{}, false, nil
}

// isNumericLabel: digits only, or "0x" followed by hex digits (possibly
// none), as WHATWG URL's "ends in a number" check.
func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		for _, c := range l[2:] {
			if !isHex(c) {
				return false
			}
		}
		return true
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isHex(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
}

// checkLDH validates an ASCII host name: letters, digits, hyphens; labels of
// 1-63 bytes not starting or ending with a hyphen; total at most 253.
func checkLDH(s string) error {
	if s == "" || len(s) > maxHostLen {
		return errors.New("bad length")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("empty or over-long label")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("label starts or ends with a hyphen")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("byte %q not allowed in a host name", c)
			}
		}
	}
	return nil
}
