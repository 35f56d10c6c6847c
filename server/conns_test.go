package server

import (
	"net"
	"testing"
)

// addrConn is a net.Conn that only has a remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestPrefixOf: the per-network limit counts IPv4 clients by /24
// (IPv4-mapped IPv6 too) and IPv6 clients by /64; unix clients by none.
func TestPrefixOf(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"203.0.113.7", "203.0.113.0/24"},
		{"203.0.113.250", "203.0.113.0/24"},
		{"::ffff:203.0.113.9", "203.0.113.0/24"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
	} {
		got := prefixOf(addrConn{remote: &net.TCPAddr{IP: net.ParseIP(c.ip), Port: 1}})
		if got != c.want {
			t.Errorf("prefixOf(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
	if got := prefixOf(addrConn{remote: &net.UnixAddr{Name: "/s", Net: "unix"}}); got != "" {
		t.Errorf("prefixOf(unix) = %q, want none", got)
	}
}
