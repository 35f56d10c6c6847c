package policy

import (
	"net/netip"
	"strconv"
	"strings"
)

// NetworkEntry is one parsed network.allow / network.deny entry (also the
// hosts of a secret): a host name, a "*." wildcard host name, an IP address
// or a CIDR, each with an optional port.
type NetworkEntry struct {
	// Host is the lower-case ASCII host name (international names in their
	// xn-- form) without the "*." prefix; "" for an address or CIDR.
	Host string
	// Wildcard: "*.example.com" matches every name below example.com (any
	// depth), not example.com itself.
	Wildcard bool
	// Prefix is set for IP addresses (a /32 or /128) and CIDRs.
	Prefix netip.Prefix
	// Port is 0 for any port.
	Port int
}

// ParseNetworkEntry parses "example.com", "*.example.com:443", "10.0.0.0/8",
// "10.0.0.0/8:5432", "192.0.2.1:8080", "[2001:db8::1]:443", "2001:db8::1" or
// "2001:db8::/32". Junk (schemes, paths, a bare "*", "*.com", empty labels,
// malformed international or non-canonical numeric names, bad ports) is an ErrInvalid
// error. It is the one parser of network entries: the egress proxy
// compiles what it returns, and reads names with the same NormalizeHost.
func ParseNetworkEntry(s string) (NetworkEntry, error) {
	var e NetworkEntry
	orig := s
	if s == "" {
		return e, invalidf("empty network entry")
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return e, invalidf("%q: contains white space or control characters", orig)
		}
	}
	if strings.Contains(s, "://") {
		return e, invalidf("%q: want a host name, address or CIDR, not a URL", orig)
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return parseCIDREntry(orig, s, i)
	}
	host, port, hasPort, err := splitEntryPort(orig, s)
	if err != nil {
		return e, err
	}
	if hasPort {
		n, ok := ParsePort(port)
		if !ok {
			return e, invalidf("%q: bad port %q (want 1-65535)", orig, port)
		}
		e.Port = n
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return e, invalidf("%q: zoned addresses are not supported", orig)
		}
		a = a.Unmap()
		e.Prefix = netip.PrefixFrom(a, a.BitLen())
		return e, nil
	}
	if strings.Contains(host, ":") {
		return e, invalidf("%q: bad address", orig)
	}
	return parseHostEntry(orig, host, e)
}

// parseCIDREntry parses a CIDR entry s (its last '/' at slash) with an
// optional ":PORT" after the prefix length.
func parseCIDREntry(orig, s string, slash int) (NetworkEntry, error) {
	var e NetworkEntry
	if j := strings.IndexByte(s[slash:], ':'); j >= 0 {
		n, ok := ParsePort(s[slash+j+1:])
		if !ok {
			return e, invalidf("%q: bad port %q (want 1-65535)", orig, s[slash+j+1:])
		}
		e.Port = n
		s = s[:slash+j]
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil || pfx.Addr().Zone() != "" {
		return e, invalidf("%q: bad CIDR (want e.g. 10.0.0.0/8 or 10.0.0.0/8:5432)", orig)
	}
	if pfx.Addr().Is4In6() {
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8: targets are unmapped.
		if pfx.Bits() < 96 {
			return e, invalidf("%q: IPv4-mapped CIDR shorter than /96", orig)
		}
		pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
	}
	e.Prefix = pfx.Masked()
	return e, nil
}

// splitEntryPort splits a host or address entry from its port:
// "[v6]:port", "host:port", or a bare IPv6 address (no port).
func splitEntryPort(orig, s string) (host, port string, hasPort bool, err error) {
	host = s
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, invalidf("%q: missing ]", orig)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", "", false, invalidf("%q: junk after ]", orig)
			}
			port, hasPort = p, true
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", "", false, invalidf("%q: bad IPv6 address in brackets", orig)
		}
	case strings.Count(s, ":") > 1:
		// a bare IPv6 address (no port possible without brackets)
	case strings.Contains(s, ":"):
		host, port, hasPort = strings.Cut(s, ":")
	}
	return host, port, hasPort, nil
}

// parseHostEntry finishes e with host name host ("*." for a wildcard),
// normalized as the proxy reads names.
func parseHostEntry(orig, host string, e NetworkEntry) (NetworkEntry, error) {
	if h, ok := strings.CutPrefix(host, "*."); ok {
		e.Wildcard = true
		host = h
	}
	if strings.HasSuffix(host, ".") {
		return e, invalidf("%q: host name ends with a dot", orig)
	}
	if strings.Contains(host, "*") {
		return e, invalidf("%q: a wildcard is only allowed as a leading \"*.\" (use network.mode: open to allow everything)", orig)
	}
	h, err := normalizeHost(host)
	if err != nil {
		return e, invalidf("%q: %v", orig, err)
	}
	if h.IsIP() {
		// "１２７.０.０.１" is an address to the proxy; a policy writes
		// addresses plainly.
		return e, invalidf("%q: not a valid IP address or host name (IPv4 addresses in dotted decimal only)", orig)
	}
	if e.Wildcard && !strings.Contains(h.Name, ".") {
		return e, invalidf("%q: a wildcard must cover at least two labels (use network.mode: open to allow everything)", orig)
	}
	e.Host = h.Name
	return e, nil
}

// String is the canonical form of e (lower case, masked CIDR).
func (e NetworkEntry) String() string {
	var h string
	switch {
	case e.Host != "":
		h = e.Host
		if e.Wildcard {
			h = "*." + h
		}
	case e.Prefix.IsValid() && e.Prefix.IsSingleIP():
		h = e.Prefix.Addr().String()
		if e.Prefix.Addr().Is6() {
			h = "[" + h + "]"
		}
	default:
		h = e.Prefix.String()
	}
	if e.Port != 0 {
		h += ":" + strconv.Itoa(e.Port)
	}
	return h
}

// MatchHost reports whether a host name (as a client asked for it) and
// port match e. Names compare case-insensitively; a trailing dot is ignored.
func (e NetworkEntry) MatchHost(host string, port int) bool {
	if e.Port != 0 && e.Port != port {
		return false
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return e.MatchAddr(a, port)
	}
	if e.Host == "" {
		return false
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if e.Wildcard {
		return strings.HasSuffix(h, "."+e.Host)
	}
	return h == e.Host
}

// Match reports whether a normalised host (NormalizeHost) and port match
// e: name entries match names, address and CIDR entries addresses.
func (e NetworkEntry) Match(h Host, port int) bool {
	if e.Port != 0 && e.Port != port {
		return false
	}
	if h.IsIP() {
		return e.Prefix.IsValid() && e.Prefix.Contains(h.Addr.Unmap())
	}
	switch {
	case e.Host == "":
		return false
	case e.Wildcard:
		return len(h.Name) > len(e.Host)+1 && strings.HasSuffix(h.Name, "."+e.Host)
	}
	return h.Name == e.Host
}

// MatchAddr reports whether an IP address and port match e (only address
// and CIDR entries match addresses).
func (e NetworkEntry) MatchAddr(a netip.Addr, port int) bool {
	if e.Port != 0 && e.Port != port {
		return false
	}
	return e.Prefix.IsValid() && e.Prefix.Contains(a.Unmap())
}

// ParsePort accepts a decimal port 1-65535 without sign or leading zeros:
// the one port grammar of network entries and the egress proxy's targets.
func ParsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(s)
	return n, n >= 1 && n <= 65535
}

// checkNetworkEntry is ParseNetworkEntry as a validation message.
func checkNetworkEntry(s string) string {
	if _, err := ParseNetworkEntry(s); err != nil {
		return message(err)
	}
	return ""
}
