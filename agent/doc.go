// Package agent is Airlock's in-sandbox agent and its protocol: the guest
// side (Serve) runs inside a sandbox as its init and starts processes, moves
// files and tunnels egress connections on behalf of the host; the host side
// (Client) drives it over one byte stream carrying a yamux session.
//
// The host never trusts the guest: every length it reads is bounded, every
// call honours its context, a protocol violation ends the session, and paths
// are checked on both sides. The guest must never widen the sandbox: it only
// acts inside the root it was started in, never follows a link out of it, and
// never runs anything the host did not ask for.
//
// # Protocol
//
// Each operation is one yamux stream. The opener first writes a header: a
// 4-byte big-endian length followed by that many bytes of JSON (a request).
// The acceptor answers with a header of the same shape (a response) and then,
// for streaming operations, frames: 1 byte type, 4-byte big-endian length,
// payload. Exec uses frames in both directions (stdin data, stdin close,
// signal, resize from the host; stdout, stderr, stdin credit, exit, error
// from the guest); ReadFile and List send frames from the guest, WriteFile
// from the host. Egress streams are opened by the guest and carry raw bytes
// after their header. PROTOCOL.md in this directory is the full
// specification with every bound.
package agent
