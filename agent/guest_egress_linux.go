package agent

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// notIdentified is the reason a connection carries when the agent was not
// asked to name programs (no rule named any when it was made).
const notIdentified = "not identified: no rule named programs when it connected"

// serveEgress tunnels each connection accepted on ln to the host.
func (g *guest) serveEgress(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			g.log.Debug("egress accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go g.tunnel(conn)
	}
}

func (g *guest) tunnel(conn net.Conn) {
	defer conn.Close()
	st, err := g.sess.OpenStream()
	if err != nil {
		return
	}
	defer st.Close()
	// Identified before a byte is read: the holder now is who connected.
	// Only while some rule names programs (the host says when): it costs a
	// walk of /proc.
	peer := sandbox.EgressPeer{Unverified: notIdentified}
	if g.identify.Load() {
		peer = identifyPeer(conn)
	}
	req := &request{Op: opEgress, Remote: conn.RemoteAddr().String(), Program: peer.Program, Unverified: truncate(peer.Unverified, 512)}
	if err := writeHeader(st, req, MaxResponseHeader); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(conn, st)
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.CloseWrite()
		} else {
			conn.Close()
		}
		close(done)
	}()
	io.Copy(st, conn)
	st.Close() // half-close: the host reads EOF
	<-done
}
