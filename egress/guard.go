package egress

import (
	"net/netip"
)

// specialRanges are addresses no sandbox reaches unless an allow-list CIDR
// names them: the SSRF guard. IPv4-mapped IPv6 targets are unmapped before
// the check, so ::ffff:127.0.0.1 is loopback.
var specialRanges = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified/this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved/broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (embeds IPv4)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// specialReason returns why addr is guarded, or "" for an ordinary public
// address. own holds the host's interface addresses.
func specialReason(addr netip.Addr, own []netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() {
		return "invalid address"
	}
	for _, s := range specialRanges {
		if s.prefix.Contains(addr) {
			return s.why
		}
	}
	for _, o := range own {
		if o.Unmap().WithZone("") == addr {
			return "address of this host"
		}
	}
	return ""
}

// GuardedOverlap returns why a CIDR allow entry would lift the SSRF guard
// (it overlaps a guarded range or one of own, the host's addresses), or ""
// for a prefix wholly in public space. Callers that bound what tenants may
// list (the server's ceilings) check every entry with it, so the union of
// the entries, however split ("0.0.0.0/1" + "128.0.0.0/1"), never reaches a
// guarded address: an entry overlapping one is refused, not a /0 only.
func GuardedOverlap(p netip.Prefix, own []netip.Addr) string {
	if !p.IsValid() {
		return "invalid prefix"
	}
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
	}
	p = p.Masked()
	for _, s := range specialRanges {
		if s.prefix.Overlaps(p) {
			return s.why + " (" + s.prefix.String() + ")"
		}
	}
	// ::ffff:0:0/96 holds every IPv4 address, guarded ones included.
	if mapped := netip.MustParsePrefix("::ffff:0:0/96"); mapped.Overlaps(p) {
		return "IPv4-mapped IPv6 (" + mapped.String() + ")"
	}
	for _, o := range own {
		if p.Contains(o.Unmap().WithZone("")) {
			return "address of this host (" + o.String() + ")"
		}
	}
	return ""
}

// HostAddrs returns this host's interface addresses (what the guard calls
// "address of this host").
func HostAddrs() ([]netip.Addr, error) { return interfaceAddrs() }
