package egress

import (
	"net/netip"
	"testing"
)

// TestGuardedOverlap: any entry that reaches a guarded address is named,
// however the space is split; public-only prefixes are not.
func TestGuardedOverlap(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("203.0.114.7")}
	guarded := []string{"0.0.0.0/0", "0.0.0.0/1", "128.0.0.0/1", "127.0.0.1/32", "169.254.169.254/32",
		"10.1.0.0/16", "8.0.0.0/6", "::/0", "::1/128", "fe80::/64", "::ffff:0:0/96",
		"203.0.114.0/24", "100.64.1.0/24"}
	for _, s := range guarded {
		if GuardedOverlap(netip.MustParsePrefix(s), own) == "" {
			t.Errorf("%s: not reported as reaching a guarded address", s)
		}
	}
	public := []string{"::ffff:8.8.8.8/128", "8.8.8.0/24", "1.1.1.1/32", "2606:4700::/32", "64.0.0.0/3"}
	for _, s := range public {
		if why := GuardedOverlap(netip.MustParsePrefix(s), own); why != "" {
			t.Errorf("%s: public, reported %q", s, why)
		}
	}
}
