// Package egress is Airlock's host-side egress proxy: every outbound
// connection a sandboxed process makes arrives here as a tunnelled stream
// (HTTP proxy request or SOCKS5), is matched against the sandbox's network
// policy, resolved on the host, checked against an SSRF guard (loopback,
// link-local, private, multicast and the host's own addresses) and then
// connected to the exact address that was checked. For the hosts a secret
// may be sent to it terminates TLS with a per-sandbox CA and swaps the
// secret's placeholder for its real value in request headers, so the real
// value never enters the sandbox. Every attempt becomes an audit event.
//
// It must never resolve a name twice for one connection, never let a
// sandbox change its own policy, never write a secret's value anywhere the
// sandbox can read it, and never fail open: anything it cannot parse or
// decide is refused.
package egress
