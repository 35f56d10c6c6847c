package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Host is a normalised host: exactly one of Name (a lower-case ASCII host
// name, no trailing dot) or Addr (an IP address; IPv4-mapped IPv6
// addresses are unmapped to IPv4) is set. Network entries and the egress
// proxy's connection targets are both read into it by NormalizeHost, so a
// rule and a target compare in one canonical form.
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

// idnaProfile is the one IDNA profile used for every name, in policies and
// in the egress proxy alike: UTS #46 lookup mapping (case folding, width
// mapping), STD3 ASCII rules, Bidi rule and DNS length checks. CheckHyphens
// is off because real host names such as "r3---sn-abc.googlevideo.com"
// carry "--" in positions 3-4; leading and trailing hyphens are still
// rejected by checkLDH.
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

// NormalizeHost reads a host as a client sent it (in a CONNECT authority,
// an absolute URI, a Host header, a SOCKS5 domain or a TLS SNI) or as a
// network entry names it, into its one canonical form, or rejects it. The
// rules:
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
//     253 bytes, and read back as itself. The mapped result is checked
//     again for IP literals, so "１２７.０.０.１" is the IPv4 literal
//     127.0.0.1, not a name.
//
// Errors wrap ErrInvalid.
func NormalizeHost(s string) (Host, error) {
	h, err := normalizeHost(s)
	if err != nil {
		return Host{}, fmt.Errorf("normalize host %q: %v: %w", s, err, ErrInvalid)
	}
	return h, nil
}

// normalizeHost is NormalizeHost with a bare reason as its error.
func normalizeHost(s string) (Host, error) {
	if s == "" {
		return Host{}, errors.New("empty")
	}
	if len(s) > 4*maxHostLen {
		return Host{}, errors.New("too long")
	}
	if !utf8.ValidString(s) {
		return Host{}, errors.New("invalid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c == 0x7f {
			return Host{}, errors.New("control byte or space")
		}
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Host{}, errors.New("unterminated IPv6 literal")
		}
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return Host{}, errors.New("bad IPv6 literal")
		}
		return Host{Addr: a.Unmap()}, nil
	}
	if strings.Contains(s, ":") {
		// Bare IPv6 (or host:port) where only a host may stand.
		return Host{}, errors.New("colon outside brackets")
	}
	name := strings.TrimSuffix(s, ".")
	ascii, err := idnaProfile.ToASCII(name)
	if err != nil {
		return Host{}, fmt.Errorf("not a valid host name (idna: %v)", err)
	}
	ascii = strings.ToLower(ascii)
	if h, ok, err := ipLiteral(ascii); ok || err != nil {
		return h, err
	}
	if err := checkLDH(ascii); err != nil {
		return Host{}, err
	}
	// The canonical form must read back as itself.
	if again, err := idnaProfile.ToASCII(ascii); err != nil || again != ascii {
		return Host{}, errors.New("not a valid host name (unstable IDNA form)")
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
		return Host{}, false, errors.New("not a valid IP address or host name: non-canonical IP literal (IPv4 addresses in dotted decimal only)")
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
	if s == "" {
		return errors.New("empty host name")
	}
	if len(s) > maxHostLen {
		return errors.New("host name longer than 253 characters")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return errors.New("empty label in host name")
		}
		if len(label) > 63 {
			return errors.New("label longer than 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("character %q not allowed in a host name", c)
			}
		}
	}
	return nil
}
